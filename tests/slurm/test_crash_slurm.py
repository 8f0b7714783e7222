"""Kill `vibesys run` at a failpoint a Slurm run passes, then reconcile and wait: the command
ran exactly once, Slurm saw exactly one job for the attempt's name, the recorded outcome is the
true one, the log came home whole, and a second reconcile changes nothing. srun at every
failpoint. sbatch, whose Python API the adapter contract crashes at every failpoint
(test_contract_slurm.py), only where the command line takes another path: the job adopted by
name after a crash before its id was committed, and the log spool's failpoint, which `vibesys
run` reaches as it shows the job's output."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.failpoints import RUN_FAILPOINTS, SPOOL_FAILPOINTS
from tests.helpers.slurm import (
    cli,
    history_text,
    job_output,
    listed,
    run_args,
    settled_sacct,
    show,
)

pytestmark = [pytest.mark.slurm, pytest.mark.crash]

#: (adapter, failpoint): a Slurm run passes every run's failpoints and, because the job prints
#: a line, the log spool's.
CASES = [
    *(("srun", point) for point in [*RUN_FAILPOINTS, *SPOOL_FAILPOINTS]),
    ("sbatch", "after_submit_effect"),
    *(("sbatch", point) for point in SPOOL_FAILPOINTS),
]

#: How long reconcile may keep answering UNRESOLVED (exit 4) because a lookup came too early.
RECONCILE_SECONDS = 20.0


def reconcile_until_resolved(cwd: Path) -> list[dict[str, Any]]:
    """`vibesys reconcile` until nothing is UNRESOLVED; every round's rows."""
    rounds: list[dict[str, Any]] = []
    deadline = time.monotonic() + RECONCILE_SECONDS
    while True:
        result = cli("reconcile", "--json", cwd=cwd)
        assert result.returncode in (0, 4), result.stderr
        assert "Traceback" not in result.stderr
        shown = json.loads(result.stdout)
        assert shown["exit_status"] == result.returncode, shown
        rounds += shown["reconciled"]
        if result.returncode == 0:
            return rounds
        assert time.monotonic() < deadline, f"still UNRESOLVED after reconciling: {rounds}"
        time.sleep(1.0)


@pytest.mark.parametrize(("adapter", "point"), CASES)
def test_crash_at_failpoint_then_reconcile(
    tmp_path: Path, slurm_toml: Path, adapter: str, point: str
) -> None:
    counter = tmp_path / "counter"
    script = f"echo ran >> {counter}; echo out; exit 3"
    crashed = cli(
        *run_args(adapter, slurm_toml),
        "sh",
        "-c",
        script,
        cwd=tmp_path,
        env={"VIBESYS_FAILPOINTS": point},
    )
    assert crashed.returncode == 137, crashed.stderr

    found = listed(tmp_path)
    assert len(found) == 1, "the invocation must not be lost"
    invocation = str(found[0]["id"])
    reconcile_until_resolved(tmp_path)
    waited = cli("wait", invocation, cwd=tmp_path)
    assert "Traceback" not in waited.stderr
    assert waited.returncode == 3, waited.stderr

    inv = show(tmp_path, invocation)
    assert (inv["state"], inv["outcome"], inv["exit_code"]) == ("DONE", "APPLICATION_FAILED", 3)
    assert len(inv["attempts"]) == 1, history_text(inv)
    assert counter.read_text() == "ran\n", "the command must run exactly once"
    assert job_output(inv) == "out\n", "the log came home whole, nothing twice"
    if point == "after_submit_effect":
        # The job was submitted but its id never committed: reconcile adopts it by name.
        assert "found by name" in history_text(inv), history_text(inv)

    # Reconcile is idempotent once the invocation is done, and the journal replays cleanly.
    again = cli("reconcile", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert show(tmp_path, invocation) == inv
    verified = cli("journal", "verify", cwd=tmp_path)
    assert verified.returncode == 0, verified.stderr

    # Slurm saw exactly one job under the attempt's name.
    rows = settled_sacct(inv["attempts"][0]["job_name"])
    assert len(rows) == 1, rows
    assert rows[0][0] == inv["attempts"][0]["job_id"]
    assert rows[0][2] == "FAILED"
