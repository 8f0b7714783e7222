"""A copy of an attempt's batch script, submitted again by hand, on the real cluster: the copy
starts first and claims the attempt; vibesys's own job starts later, finds the attempt claimed
and runs nothing (exit 85) while the copy still runs the command. The attempt's outcome is the
copy's command's, never the refusal's."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.helpers.hang_guard import wait_until
from tests.helpers.slurm import (
    cli,
    finished_evidence,
    run_args,
    show,
    slurm,
    wait_for_job_id,
    wait_for_state,
)
from vibesys.adapters.slurm.script import SCRIPT_FILE

pytestmark = pytest.mark.slurm


@pytest.mark.parametrize("fault", ["none", "stall", "kill"])
def test_the_job_that_claimed_the_attempt_is_its_outcome(
    tmp_path: Path, slurm_toml: Path, all_gpus_taken: str, fault: str
) -> None:
    """And while the copy is frozen (SIGSTOP) the attempt waits for it; killed, its end is the
    attempt's."""
    # vibesys's job asks for a GPU: it stays PENDING while the holder has both.
    detached = cli(
        *run_args("sbatch", slurm_toml, "--detach", "--gpus", "1"),
        "sh",
        "-c",
        "sleep 6; exit 3",
        cwd=tmp_path,
    )
    assert detached.returncode == 0, detached.stderr
    invocation, job_name, ours = wait_for_job_id(tmp_path)
    assert wait_for_state(job_name, ["PENDING"]) == ours
    # Held, it reserves no node for itself; the copy asks for no GPU, so it starts at once
    # and claims the attempt.
    slurm("scontrol", "hold", ours)
    script = tmp_path / "remote" / invocation / "1" / SCRIPT_FILE
    copy = slurm("sbatch", "--parsable", "--gres=none", str(script)).strip()
    assert wait_for_state(job_name, ["RUNNING"]) == copy
    wait_for_file(script.parent / "claim")  # RUNNING in squeue a moment before it claims
    assert f"slurm_job_id={copy}" in (script.parent / "claim").read_text()
    # Now vibesys's job starts, finds the claim and ends (85) while the copy still runs.
    slurm("scancel", all_gpus_taken)
    slurm("scontrol", "release", ours)
    wait_for_file(script.parent / "refused")

    if fault == "stall":
        pids = copy_pids(copy)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(8)  # past the command's own 6 s, many status rounds
        assert show(tmp_path, invocation)["state"] == "RUNNING"
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    elif fault == "kill":
        slurm("scancel", copy)

    waited = cli("wait", invocation, cwd=tmp_path, timeout=120)
    inv = show(tmp_path, invocation)
    assert len(inv["attempts"]) == 1
    evidence = finished_evidence(inv)
    assert f"claimed by job {copy}" in evidence, evidence
    if fault == "kill":
        assert waited.returncode == 130, waited.stderr
        assert (inv["state"], inv["outcome"]) == ("DONE", "CANCELLED")
    else:
        assert waited.returncode == 3, waited.stderr
        assert (inv["state"], inv["outcome"], inv["exit_code"]) == (
            "DONE",
            "APPLICATION_FAILED",
            3,
        )


def wait_for_file(path: Path) -> None:
    wait_until(path.exists, 30, f"{path.name} to appear", interval=0.05)


def copy_pids(job_id: str) -> list[int]:
    """The processes of the job's batch script on this node (not slurmstepd)."""
    out = slurm("scontrol", "listpids", job_id)
    pids = [int(line.split()[0]) for line in out.splitlines()[1:] if line.split()]
    assert pids, out
    return pids
