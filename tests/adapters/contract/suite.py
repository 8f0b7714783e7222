"""The adapter contract, written once against a `System` (a backend and how to ask its batch
system what it was given): outcomes (success with its logs, a failure's exit code, cancel), a
crash at every failpoint followed by reconcile, and a submission the batch system accepts
after the submitter gave up on it (fenced: the late job refuses). Whatever happens, the command
runs once and the batch system is given one job per attempt. Bound to the test-only scheduler
in test_batch_contract.py and to Slurm's sbatch in tests/slurm/test_contract_slurm.py."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from tests.helpers.faults import Crash, crash_at, recover
from vibesys.adapters.base import Backend
from vibesys.adapters.requests import AdapterRequest
from vibesys.engine import DriveOptions, Engine, RetryPolicy, drive, reconcile
from vibesys.journal_schema import Invocation, open_journal, verify_journal
from vibesys.states import JobState, Outcome

#: How long reconcile may keep answering UNRESOLVED because a lookup came too early (a batch
#: system's accounting lags a job's end).
RECONCILE_SECONDS = 20.0

#: How long a late job may take to start and refuse once its submission got through.
LATE_SECONDS = 60.0


@dataclass
class System:
    """One batch system under the contract."""

    adapter: str
    backend: Backend
    request: AdapterRequest
    #: how many jobs the batch system was given under a job name
    submitted: Callable[[str], int]
    root: Path
    #: where the jobs' attempt directories are: REMOTE_ROOT/INVOCATION/ATTEMPT
    remote_root: Path
    #: within the block, the next submission stalls until the submitter gives up on it; the
    #: batch system accepts it when the block ends
    late_submission: Callable[[], AbstractContextManager[None]] | None = None

    def engine(self, owner: str = "host:1:1", unreachable_seconds: float = 0.0) -> Engine:
        policy = RetryPolicy(max_retries=1, initial_delay_seconds=0.0)
        backend = self.backend
        journal = open_journal(self.root / "j.db")
        return Engine(
            journal,
            lambda name, request: backend,  # type: ignore[arg-type,return-value]
            retry=policy,
            owner=owner,
            unreachable_timeout=timedelta(seconds=unreachable_seconds),
        )

    def prepare(self, engine: Engine, script: str) -> Invocation:
        return engine.prepare(
            adapter=self.adapter,
            command=["sh", "-c", script],
            request=self.request,
            run_root=self.root / "runs",
        )


def check_success(system: System) -> None:
    engine = system.engine()
    inv = drive(engine, system.prepare(engine, "echo out; echo err >&2"), DriveOptions())
    assert (inv.state, inv.outcome, inv.exit_code) == (JobState.DONE, Outcome.COMPLETED, 0)
    attempt = Path(inv.invocation_dir) / "1"
    assert (attempt / "stdout").read_text() == "out\n"
    assert (attempt / "stderr").read_text() == "err\n"
    assert system.submitted(engine.journal.invocations.attempts(inv.id)[0].job_name) == 1


def check_failure(system: System) -> None:
    engine = system.engine()
    inv = drive(engine, system.prepare(engine, "exit 3"), DriveOptions())
    assert (inv.state, inv.outcome, inv.exit_code) == (
        JobState.DONE,
        Outcome.APPLICATION_FAILED,
        3,
    )


def check_cancel(system: System) -> None:
    engine = system.engine()
    inv = drive(engine, system.prepare(engine, "sleep 60"), DriveOptions(detach=True))
    assert inv.state is JobState.RUNNING
    inv = drive(engine, engine.request_cancel(inv, "test"), DriveOptions())
    assert (inv.state, inv.outcome) == (JobState.DONE, Outcome.CANCELLED)


def reconcile_until_resolved(engine: Engine) -> None:
    """Reconcile until nothing is UNRESOLVED and no row failed, within RECONCILE_SECONDS."""
    deadline = time.monotonic() + RECONCILE_SECONDS
    while True:
        rows = reconcile(engine)
        unresolved = [
            inv.id
            for inv in engine.journal.invocations.active()
            if inv.state is JobState.UNRESOLVED
        ]
        if not unresolved and not any(row.failed for row in rows):
            return
        assert time.monotonic() < deadline, f"still UNRESOLVED after reconciling: {rows}"
        time.sleep(1.0)


def check_crash_then_reconcile(system: System, monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    counter = system.root / "counter"
    engine = system.engine()
    crash_at(monkeypatch, point)
    with pytest.raises(Crash):
        drive(
            engine,
            system.prepare(engine, f"echo ran >> {counter}; echo out; exit 3"),
            DriveOptions(),
        )
    recover(monkeypatch)
    survivor = system.engine()
    reconcile_until_resolved(survivor)
    (listed,) = survivor.journal.invocations.list_invocations()
    inv = drive(survivor, survivor.journal.invocations.get(listed.id), DriveOptions())
    assert (inv.state, inv.outcome, inv.exit_code) == (
        JobState.DONE,
        Outcome.APPLICATION_FAILED,
        3,
    )
    assert counter.read_text() == "ran\n", "the command must run exactly once"
    attempts = survivor.journal.invocations.attempts(inv.id)
    assert len(attempts) == 1
    stdout = Path(inv.invocation_dir) / "1" / "stdout"
    assert stdout.read_text() == "out\n", "the log came home whole, nothing twice"
    assert system.submitted(attempts[0].job_name) == 1, "exactly one job submitted"
    assert verify_journal(survivor.journal) == []


def check_late_submission_is_fenced(system: System) -> None:
    """The first submission stalls and the submitter gives up on it: the ambiguous attempt is
    fenced before the second is submitted. When the batch system accepts the first one after
    all, its job finds the fence and refuses, running nothing."""
    assert system.late_submission is not None
    counter = system.root / "counter"
    # An open outcome is driven on, as `vibesys run` does, not reported at once.
    engine = system.engine(unreachable_seconds=LATE_SECONDS)
    with system.late_submission():
        inv = drive(engine, system.prepare(engine, f"echo ran >> {counter}"), DriveOptions())
    assert (inv.state, inv.outcome) == (JobState.DONE, Outcome.COMPLETED)
    first, second = engine.journal.invocations.attempts(inv.id)
    assert "kind=fence" in str(first.claim), first
    refused = system.remote_root / inv.id / "1" / "refused"
    deadline = time.monotonic() + LATE_SECONDS
    while not (refused.exists() and system.submitted(first.job_name)):
        assert time.monotonic() < deadline, "the late job never refused"
        time.sleep(0.1)
    assert "kind=fence" in refused.read_text()
    assert counter.read_text() == "ran\n", "the command ran exactly once"
    assert [system.submitted(a.job_name) for a in (first, second)] == [1, 1]
