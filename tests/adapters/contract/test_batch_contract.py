"""The adapter contract (suite.py) against the test-only batch scheduler written on the batch
base (tests/fakebatch), and the stall its submit command may meet: a submission the batch
system accepts after the submitter gave up on it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.adapters.contract.suite import (
    RUN_FAILPOINTS,
    System,
    check_cancel,
    check_crash_then_reconcile,
    check_failure,
    check_success,
)
from tests.fakebatch.adapter import QSYS_ENTRY, QsysBackend, QsysRequest
from vibesys.adapters.registry import ADAPTERS, register
from vibesys.engine import DriveOptions, drive
from vibesys.states import JobState, Outcome


@pytest.fixture(autouse=True, scope="module")
def qsys_registered() -> Iterator[None]:
    """The test-only scheduler is an adapter while these tests run, and only then."""
    register(QSYS_ENTRY)
    yield
    del ADAPTERS[QSYS_ENTRY.name]


def qsys_system(root: Path, timeout: float = 30.0) -> System:
    state = root / "qsys"

    def submitted(name: str) -> int:
        jobs = [json.loads(p.read_text()) for p in state.glob("*.json")]
        return sum(1 for job in jobs if job["name"] == name)

    backend = QsysBackend(state, timeout=timeout)
    return System("qsys", backend, QsysRequest(state=str(state)), submitted, root)


def test_success_and_its_logs(tmp_path: Path) -> None:
    check_success(qsys_system(tmp_path))


def test_failure_keeps_its_exit_code(tmp_path: Path) -> None:
    check_failure(qsys_system(tmp_path))


def test_cancel(tmp_path: Path) -> None:
    check_cancel(qsys_system(tmp_path))


@pytest.mark.parametrize("point", RUN_FAILPOINTS)
def test_crash_at_failpoint_then_reconcile_runs_exactly_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    check_crash_then_reconcile(qsys_system(tmp_path), monkeypatch, point)


def test_a_submission_accepted_after_its_fence_never_runs(tmp_path: Path) -> None:
    """The batch system froze during the submission and accepted it after the submitter gave
    up: the ambiguous attempt is fenced before the next one, and the late job refuses.
    (Slurm's: tests/slurm/test_stalls_slurm.py, with a frozen slurmctld.)"""
    counter = tmp_path / "counter"
    (tmp_path / "qsys").mkdir()
    (tmp_path / "qsys" / "freeze").touch()
    system = qsys_system(tmp_path, timeout=2.0)
    engine = system.engine()
    inv = drive(engine, system.prepare(engine, f"echo ran >> {counter}"), DriveOptions())
    assert (inv.state, inv.outcome) == (JobState.DONE, Outcome.COMPLETED)
    assert [a.attempt for a in engine.journal.attempts(inv.id)] == [1, 2]
    (tmp_path / "qsys" / "release").touch()
    first = tmp_path / "qsys" / "runs" / inv.id / "1"
    deadline = time.monotonic() + 20
    while not (first / "refused").exists():
        assert time.monotonic() < deadline, "the late job never refused"
        time.sleep(0.05)
    assert "kind=fence" in (first / "claim").read_text()
    assert counter.read_text() == "ran\n", "the command ran exactly once"
