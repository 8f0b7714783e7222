"""A copy of an attempt's batch script, submitted again by hand, on the real cluster: the copy
starts first and claims the attempt; vibesys's own job starts later, finds the attempt claimed
and runs nothing (exit 85) while the copy still runs the command. The attempt's outcome is the
copy's command's, never the refusal's."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.slurm.helpers import (
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


def test_the_job_that_claimed_the_attempt_is_its_outcome(
    tmp_path: Path, slurm_toml: Path, all_gpus_taken: str
) -> None:
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
    claim = script.parent / "claim"
    deadline = time.monotonic() + 30
    while not claim.exists():  # RUNNING in squeue a moment before the script claims
        assert time.monotonic() < deadline, "the copy never claimed the attempt"
        time.sleep(0.05)
    assert f"slurm_job_id={copy}" in claim.read_text()
    # Now vibesys's job starts, finds the claim and ends (85) while the copy still runs.
    slurm("scancel", all_gpus_taken)
    slurm("scontrol", "release", ours)

    waited = cli("wait", invocation, cwd=tmp_path, timeout=120)
    assert waited.returncode == 3, waited.stderr
    inv = show(tmp_path, invocation)
    assert (inv["state"], inv["outcome"], inv["exit_code"]) == ("DONE", "APPLICATION_FAILED", 3)
    assert len(inv["attempts"]) == 1
    assert (script.parent / "refused").exists(), "vibesys's own job did not refuse"
    evidence = finished_evidence(inv)
    assert f"claimed by job {copy}" in evidence, evidence
