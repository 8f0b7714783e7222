"""Chains (`--after PARENT`) follow the parent invocation, not its first attempt: a pending child
is pointed at the parent's new attempt when the parent is retried (by the process that records
the new job, else by whoever looks at the child next), and a child whose parent failed for good
ends DEPENDENCY_FAILED (exit 66), never CANCELLED (130). On the scripted fake adapter."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from vibesys.adapters.base import RemoteState
from vibesys.adapters.fake import FakeAttempt, FakeBackend, FakeRequest
from vibesys.engine import DriveOptions, Engine, RetryPolicy, drive, reconcile
from vibesys.engine import core as core_module
from vibesys.journal_schema import Invocation, Journal
from vibesys.states import FailureClass, JobState, Outcome, SubmitIntended
from vibesys.states.exits import exit_status

S = RemoteState
WAITS = FakeAttempt((S.PENDING,))  # a child held by its dependency


ELSEWHERE = "elsewhere:1:1"  # the parent's live driver, in another process


def engine_of(journal: Journal, fake: FakeBackend, owner: str | None = None) -> Engine:
    policy = RetryPolicy(max_retries=2, initial_delay_seconds=0.0)
    extra = {} if owner is None else {"owner": owner}
    return Engine(journal, lambda adapter, request: fake, retry=policy, **extra)  # type: ignore[arg-type]


def record(engine: Engine, tmp_path: Path, after: str | None = None) -> Invocation:
    return engine.prepare(
        adapter="fake", command=["x"], request=FakeRequest(after=after), run_root=tmp_path
    )


def detached(engine: Engine, tmp_path: Path, after: str | None = None) -> Invocation:
    inv = drive(engine, record(engine, tmp_path, after), DriveOptions(detach=True))
    assert inv.state is JobState.RUNNING
    return inv


def driven_elsewhere(journal: Journal, parent: Invocation) -> None:
    assert journal.acquire_lease(parent.id, ELSEWHERE, timedelta(minutes=5))


def waits_on(journal: Journal, inv: Invocation) -> str:
    return str(journal.attempts(inv.id)[-1].provenance.get("after_job"))


def follows(fake: FakeBackend) -> list[str]:
    return [what for kind, what in fake.calls if kind == "follow_parent"]


def test_a_retried_parent_takes_its_pending_child_along(journal: Journal, tmp_path: Path) -> None:
    """The parent's driver, recording its new attempt's job, points the waiting child at it."""
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.NODE_FAIL)), WAITS, FakeAttempt((S.COMPLETED,))])
    parent = detached(engine_of(journal, fake), tmp_path)
    driven_elsewhere(journal, parent)
    child = detached(engine_of(journal, fake), tmp_path, after=parent.id)
    child_job = f"vibesys-{child.id}-1"
    assert fake.waits_on[child_job] == parent.job_id == waits_on(journal, child)
    driver = engine_of(journal, fake, owner=ELSEWHERE)
    parent = drive(driver, journal.get(parent.id), DriveOptions())
    assert (parent.outcome, parent.attempt) == (Outcome.COMPLETED, 2)
    assert follows(fake) == [f"{child_job}->{parent.job_id}"]
    assert fake.waits_on[child_job] == parent.job_id == waits_on(journal, child)
    # A later look at the child finds it waiting on the job that completed: nothing to move.
    reconcile(engine_of(journal, fake))
    assert len(follows(fake)) == 1 and journal.get(child.id).state is JobState.RUNNING
    assert fake.submits().count(child_job) == 1


def test_a_waiting_child_carries_a_parent_nobody_drives(journal: Journal, tmp_path: Path) -> None:
    """Nobody drives the parent: the child's own driver carries it on (its failure seen, its
    retry submitted and completed), and the child then waits on the attempt that completed."""
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.NODE_FAIL)), WAITS, FakeAttempt((S.COMPLETED,))])
    parent = detached(engine_of(journal, fake), tmp_path)
    child = detached(engine_of(journal, fake), tmp_path, after=parent.id)
    parent = journal.get(parent.id)
    assert (parent.outcome, parent.attempt, parent.lease_owner) == (Outcome.COMPLETED, 2, None)
    assert fake.waits_on[f"vibesys-{child.id}-1"] == parent.job_id == waits_on(journal, child)


def test_whoever_looks_at_the_child_points_it_at_the_new_attempt(
    journal: Journal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash right after the parent's new job was recorded (before the children were moved):
    the next look at a child still waiting on the old attempt moves it."""
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.NODE_FAIL)), WAITS, FakeAttempt((S.RUNNING,))])
    parent = detached(engine_of(journal, fake), tmp_path)
    driven_elsewhere(journal, parent)
    child = detached(engine_of(journal, fake), tmp_path, after=parent.id)
    first_job = parent.job_id
    with monkeypatch.context() as patch:
        patch.setattr(core_module, "follow_children", lambda *args: None)
        driver = engine_of(journal, fake, owner=ELSEWHERE)
        parent = drive(driver, journal.get(parent.id), DriveOptions(detach=True))
    driven_elsewhere(journal, parent)
    assert parent.attempt == 2 and parent.job_id != first_job
    assert waits_on(journal, child) == first_job and follows(fake) == []
    rows = {row.invocation_id: row for row in reconcile(engine_of(journal, fake))}
    assert follows(fake) == [f"vibesys-{child.id}-1->{parent.job_id}"]
    assert waits_on(journal, child) == parent.job_id
    assert f"now waits on job {parent.job_id} of {parent.id}" in rows[child.id].evidence


def test_a_child_submitted_while_its_parent_retries_waits_for_the_new_attempt(
    journal: Journal, tmp_path: Path
) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.NODE_FAIL)), WAITS, FakeAttempt((S.RUNNING,))])
    engine = Engine(journal, lambda adapter, request: fake, retry=RetryPolicy(2, 3600.0))
    parent = detached(engine, tmp_path)
    reconcile(engine)  # the node failure is seen: an hour's backoff
    parent = journal.get(parent.id)
    assert parent.state is JobState.RETRYING
    failed_job = parent.job_id
    child = detached(engine, tmp_path, after=parent.id)
    assert fake.waits_on[f"vibesys-{child.id}-1"] == failed_job, "pending, never satisfied"
    journal.conn.execute("UPDATE invocations SET not_before=NULL WHERE id=?", (parent.id,))
    parent = drive(engine, journal.get(parent.id), DriveOptions(detach=True))
    assert fake.waits_on[f"vibesys-{child.id}-1"] == parent.job_id != failed_job


def test_a_child_of_a_completed_parent_waits_on_nothing(journal: Journal, tmp_path: Path) -> None:
    fake = FakeBackend([FakeAttempt((S.COMPLETED,)), WAITS])
    engine = engine_of(journal, fake)
    parent = drive(engine, record(engine, tmp_path), DriveOptions())
    assert parent.outcome is Outcome.COMPLETED
    child = detached(engine, tmp_path, after=parent.id)
    assert fake.waits_on[f"vibesys-{child.id}-1"] is None
    assert waits_on(journal, child) == "none"


def test_a_waiting_child_of_a_failed_parent_says_so(journal: Journal, tmp_path: Path) -> None:
    """Its own run, in the foreground, carries the parent on to its failure, then cancels its
    own pending job and ends DEPENDENCY_FAILED (exit 66), never CANCELLED (130)."""
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.RUNNING, S.FAILED), exit_code=1), WAITS])
    engine = engine_of(journal, fake)
    parent = detached(engine, tmp_path)
    child = drive(engine, record(engine, tmp_path, after=parent.id), DriveOptions())
    assert journal.get(parent.id).exit_code == 1
    assert (child.outcome, child.failure_class) == (
        Outcome.DEPENDENCY_FAILED,
        FailureClass.DEPENDENCY_FAILED,
    )
    assert exit_status(child) == 66
    assert ("cancel", f"vibesys-{child.id}-1") in fake.calls, "its pending job is cancelled"
    history = {h.event: h.evidence for h in journal.history(child.id)}
    assert f"{parent.id}, ended APPLICATION_FAILED" in history["CancelRequested"]["by"]
    assert "so its command never ran" in history["Finished"]["observation"]
    assert journal.history(child.id)[-1].evidence["outcome"] == "DEPENDENCY_FAILED"


def test_a_child_recorded_after_its_parent_failed_is_never_submitted(
    journal: Journal, tmp_path: Path
) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.FAILED), exit_code=2)])
    engine = engine_of(journal, fake)
    parent = drive(engine, record(engine, tmp_path), DriveOptions())
    child = drive(engine, record(engine, tmp_path, after=parent.id), DriveOptions())
    assert (child.state, child.outcome, exit_status(child)) == (
        JobState.DONE,
        Outcome.DEPENDENCY_FAILED,
        66,
    )
    [event] = [h for h in journal.history(child.id) if h.event == "ParentFailed"]
    assert event.evidence["parent"] == parent.id
    assert "nothing submitted" in event.evidence["observation"]
    assert fake.submits() == [f"vibesys-{parent.id}-1"]


def test_a_child_whose_intent_came_before_its_parent_failed_is_never_submitted(
    journal: Journal, tmp_path: Path
) -> None:
    """A crash right after the child's intent (nothing sent), then the parent fails: whoever
    carries the child on ends it before its dispatch."""
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.FAILED), exit_code=2)])
    engine = engine_of(journal, fake)
    parent = detached(engine, tmp_path)
    child = record(engine, tmp_path, after=parent.id)
    child, _ = journal.commit_transition(child, SubmitIntended(1, f"vibesys-{child.id}-1"))
    assert drive(engine, journal.get(parent.id), DriveOptions()).outcome is not Outcome.COMPLETED
    child = engine.advance(journal.get(child.id))
    assert (child.state, child.outcome) == (JobState.DONE, Outcome.DEPENDENCY_FAILED)
    assert [h.event for h in journal.history(child.id)] == ["SubmitIntended", "ParentFailed"]
    assert fake.submits() == [f"vibesys-{parent.id}-1"]
