"""Failpoints the local adapter cannot reach (infrastructure failures, unknown outcomes),
crashed in-process against the FakeBackend, which stands for the remote world that survives."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.faults import Crash, crash_at, recover
from vibesys.adapters.base import RemoteState
from vibesys.adapters.fake import FakeAttempt, FakeBackend
from vibesys.engine import DriveOptions, Engine, RetryPolicy, drive, reconcile
from vibesys.journal_schema import open_journal, verify_journal
from vibesys.states import JobState, Outcome

S = RemoteState


def new_engine(path: Path, fake: FakeBackend, owner: str) -> Engine:
    policy = RetryPolicy(max_retries=2, initial_delay_seconds=0.0)
    return Engine(open_journal(path), lambda name, options: fake, retry=policy, owner=owner)  # type: ignore[arg-type,return-value]


def test_crash_after_infra_failure_is_retried_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeBackend([FakeAttempt((S.NODE_FAIL,)), FakeAttempt((S.COMPLETED,))])
    engine = new_engine(tmp_path / "j.db", fake, "host:1:1")
    inv = engine.prepare(adapter="fake", command=["x"], run_root=tmp_path)
    crash_at(monkeypatch, "after_infra_failed_commit")
    with pytest.raises(Crash):
        drive(engine, inv, DriveOptions())
    recover(monkeypatch)
    # The crashed process's lease is on "host": pretend it expired by taking it over by name.
    survivor = new_engine(tmp_path / "j.db", fake, "host:1:1")
    assert survivor.journal.invocations.get(inv.id).state is JobState.RETRYING
    reconcile(survivor)
    final = drive(survivor, survivor.journal.invocations.get(inv.id), DriveOptions())
    assert final.outcome is Outcome.COMPLETED
    assert len(fake.submits()) == 2 and len(set(fake.submits())) == 2
    assert verify_journal(survivor.journal) == []


def test_crash_after_unknown_then_evidence_arrives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.UNKNOWN, S.COMPLETED))])
    engine = new_engine(tmp_path / "j.db", fake, "host:1:1")
    inv = engine.prepare(adapter="fake", command=["x"], run_root=tmp_path)
    crash_at(monkeypatch, "after_unknown_commit")
    with pytest.raises(Crash):
        drive(engine, inv, DriveOptions())
    recover(monkeypatch)
    survivor = new_engine(tmp_path / "j.db", fake, "host:1:1")
    assert survivor.journal.invocations.get(inv.id).state is JobState.UNRESOLVED
    rows = reconcile(survivor)
    assert rows[0].before is JobState.UNRESOLVED and rows[0].after is JobState.DONE
    assert survivor.journal.invocations.get(inv.id).outcome is Outcome.COMPLETED
    assert len(fake.submits()) == 1
