"""Ctrl-C on `vibesys run` cancels the Slurm job, queued or running, and waits until it has
settled."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.slurm import (
    finished_evidence,
    run_args,
    sacct_states,
    show,
    wait_for_job_id,
    wait_for_state,
)

pytestmark = pytest.mark.slurm


@pytest.mark.parametrize("adapter", ["sbatch", "srun"])
def test_sigint_cancels_the_running_job(tmp_path: Path, slurm_toml: Path, adapter: str) -> None:
    interrupt_and_check(tmp_path, run_args(adapter, slurm_toml), "RUNNING")


@pytest.mark.parametrize("adapter", ["sbatch", "srun"])
def test_sigint_cancels_the_queued_job(
    tmp_path: Path, slurm_toml: Path, adapter: str, all_gpus_taken: str
) -> None:
    interrupt_and_check(tmp_path, run_args(adapter, slurm_toml, "--gpus", "1"), "PENDING")


def interrupt_and_check(tmp_path: Path, args: list[str], job_state: str) -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "vibesys", *args, "sleep", "60"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            invocation, job_name, job_id = wait_for_job_id(tmp_path)
            assert wait_for_state(job_name, [job_state]) == job_id
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    inv = show(tmp_path, invocation)
    assert (inv["state"], inv["outcome"]) == ("DONE", "CANCELLED")
    assert len(inv["attempts"]) == 1
    assert "cancelled by vibesys" in finished_evidence(inv)
    # The job is gone from the cluster, and Slurm's accounting says it was cancelled.
    assert sacct_states(job_name) == ["CANCELLED"]
