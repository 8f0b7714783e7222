"""Chains (`--after PARENT`) follow the parent invocation, not its first attempt. The scheduler
kills a child whose parent's job failed (the fake adapter does as Slurm with
`--kill-on-invalid-dep=yes`); the child is fenced and submitted again after the parent's new
attempt (by the process that records the new job, else by whoever looks at the child next)
without spending a retry, and a child whose parent failed for good ends DEPENDENCY_FAILED
(exit 66), never CANCELLED (130). On the scripted fake adapter."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from vibesys.adapters.base import RemoteState
from vibesys.adapters.fake import FakeAttempt, FakeBackend, FakeRequest
from vibesys.engine import DriveOptions, Engine, RetryPolicy, drive, reconcile
from vibesys.engine import core as core_module
from vibesys.engine.reconcile import ReconcileRow
from vibesys.journal_schema import Invocation, Journal
from vibesys.journal_schema.verify import verify_journal
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
    assert journal.leases.acquire_lease(parent.id, ELSEWHERE, timedelta(minutes=5))


def waits_on(journal: Journal, inv: Invocation) -> str:
    return str(journal.invocations.attempts(inv.id)[-1].provenance.get("after_job"))


def history(journal: Journal, inv: Invocation) -> list[str]:
    return [h.event for h in journal.invocations.history(inv.id)]


def ran_once(journal: Journal, fake: FakeBackend, child: Invocation) -> None:
    """The child ended COMPLETED on its second attempt, submitted once, without a retry."""
    child = journal.invocations.get(child.id)
    assert (child.outcome, child.attempt, child.retries) == (Outcome.COMPLETED, 2, 0)
    first, second = f"vibesys-{child.id}-1", f"vibesys-{child.id}-2"
    assert fake.ran.count(second) == 1 and first not in fake.ran, fake.ran
    assert fake.submits().count(first) == fake.submits().count(second) == 1
    assert history(journal, child).count("ParentAttemptFailed") == 1
    assert [a.failure_class for a in journal.invocations.attempts(child.id)] == [
        FailureClass.DEPENDENCY_FAILED,
        FailureClass.COMPLETED,
    ]
    assert verify_journal(journal) == [], "the history replays through the transition table"


#: parent 1 fails (node), child 1 is killed with it, parent 2 and child 2 complete
RETRIED = [
    FakeAttempt((S.RUNNING, S.NODE_FAIL)),
    WAITS,
    FakeAttempt((S.RUNNING, S.COMPLETED)),
    FakeAttempt((S.COMPLETED,)),
]


def test_the_process_that_retries_the_parent_submits_the_killed_child_again(
    journal: Journal, tmp_path: Path
) -> None:
    """The parent's job fails; the scheduler kills the child waiting on it. The parent's
    driver, recording its new attempt's job, fences the child's attempt and submits it again
    to wait on that job: no retry spent (its budget is 0), submitted once, run once."""
    fake = FakeBackend(list(RETRIED))
    parent = detached(engine_of(journal, fake), tmp_path)
    driven_elsewhere(journal, parent)
    no_budget = Engine(journal, lambda a, r: fake, retry=RetryPolicy(0, 0.0))  # type: ignore[arg-type]
    child = detached(no_budget, tmp_path, after=parent.id)
    assert fake.waits_on[f"vibesys-{child.id}-1"] == parent.job_id == waits_on(journal, child)
    driver = engine_of(journal, fake, owner=ELSEWHERE)
    parent = drive(driver, journal.invocations.get(parent.id), DriveOptions())
    assert (parent.outcome, parent.attempt) == (Outcome.COMPLETED, 2)
    assert fake.waits_on[f"vibesys-{child.id}-2"] == parent.job_id == waits_on(journal, child)
    assert ("fence", f"vibesys-{child.id}-1") in fake.calls
    assert history(journal, child)[3:] == [
        "FenceIntended",
        "ParentAttemptFailed",
        "SubmitIntended",
        "SubmitDispatched",
        "Submitted",
    ]
    for _ in range(3):
        reconcile(engine_of(journal, fake))
    ran_once(journal, fake, child)


# It takes milliseconds; a child that waits for good must fail soon, not at the suite's bound.
@pytest.mark.timeout(15)
def test_a_waiting_child_carries_a_parent_nobody_drives(journal: Journal, tmp_path: Path) -> None:
    """Nobody drives the parent: the child's own run, in the foreground, carries it on (its
    failure seen, its retry submitted), and submits itself again after the new attempt."""
    fake = FakeBackend(list(RETRIED))
    parent = detached(engine_of(journal, fake), tmp_path)
    child = drive(
        engine_of(journal, fake),
        record(engine_of(journal, fake), tmp_path, parent.id),
        DriveOptions(),
    )
    parent = journal.invocations.get(parent.id)
    assert (parent.outcome, parent.attempt, parent.lease_owner) == (Outcome.COMPLETED, 2, None)
    ran_once(journal, fake, child)


def retried_without_its_children(
    journal: Journal, fake: FakeBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Invocation, Invocation]:
    """A parent and its waiting child; the parent's job fails and its driver elsewhere submits
    its retry, then crashes before carrying its children on: (parent, child)."""
    parent = detached(engine_of(journal, fake), tmp_path)
    driven_elsewhere(journal, parent)
    child = detached(engine_of(journal, fake), tmp_path, after=parent.id)
    with monkeypatch.context() as patch:
        patch.setattr(core_module, "submit_children", lambda *args: None)
        driver = engine_of(journal, fake, owner=ELSEWHERE)
        parent = drive(driver, journal.invocations.get(parent.id), DriveOptions(detach=True))
    return parent, child


def test_whoever_looks_next_submits_the_killed_child_again(
    journal: Journal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash right after the parent's new job was recorded (before its children were
    carried on): the next look at the child, a reconcile, submits it to wait on that job."""
    fake = FakeBackend(list(RETRIED))
    parent, child = retried_without_its_children(journal, fake, tmp_path, monkeypatch)
    driven_elsewhere(journal, parent)
    assert parent.attempt == 2 and journal.invocations.get(child.id).attempt == 1
    rows = {row.invocation_id: row for row in reconcile(engine_of(journal, fake))}
    assert waits_on(journal, child) == parent.job_id
    assert rows[child.id].after is JobState.RUNNING, rows[child.id]
    journal.leases.release_lease(parent.id, ELSEWHERE)
    for _ in range(3):
        reconcile(engine_of(journal, fake))
    ran_once(journal, fake, child)


@pytest.mark.parametrize(
    ("shown_by", "outcome"),
    [(None, Outcome.COMPLETED), ("1000", Outcome.CANCELLED)],
    ids=["slurms-kill", "a-users-scancel"],
)
def test_a_killed_child_first_seen_as_a_plain_cancel(
    journal: Journal,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    shown_by: str | None,
    outcome: Outcome,
) -> None:
    """Looked at only after squeue forgot why Slurm killed it, the child shows as sacct keeps
    it: CANCELLED, never started, no uid. Its parent's job having failed, that is the
    dependency's kill: fenced, then submitted again after the parent's next attempt. A
    cancel sacct names a user for stays that user's cancel."""
    fake = FakeBackend(list(RETRIED))
    fake.dependency_kill_shown_as = (S.CANCELLED, shown_by)
    parent, child = retried_without_its_children(journal, fake, tmp_path, monkeypatch)
    journal.leases.release_lease(parent.id, ELSEWHERE)
    for _ in range(4):
        reconcile(engine_of(journal, fake))
    if outcome is Outcome.COMPLETED:
        ran_once(journal, fake, child)
    else:
        child = journal.invocations.get(child.id)
        assert (child.outcome, child.attempt) == (Outcome.CANCELLED, 1)
        assert ("fence", f"vibesys-{child.id}-1") not in fake.calls
        assert journal.invocations.get(parent.id).outcome is Outcome.COMPLETED


def failed_unseen_then_reconciled(
    journal: Journal, fake: FakeBackend, tmp_path: Path
) -> tuple[Invocation, Invocation, dict[str, ReconcileRow]]:
    """A parent whose job failed where only the scheduler knows (its live driver elsewhere
    has not looked yet), and its child; a reconcile has run: (parent, child, its rows)."""
    parent = detached(engine_of(journal, fake), tmp_path)
    driven_elsewhere(journal, parent)
    child = detached(engine_of(journal, fake), tmp_path, after=parent.id)
    ref = engine_of(journal, fake).adapters.job_ref(parent)
    fake.status([ref])
    assert fake.status([ref])[ref.job_name].state is S.NODE_FAIL  # only the scheduler knows
    rows = {row.invocation_id: row for row in reconcile(engine_of(journal, fake))}
    return parent, child, rows


def test_a_plain_cancel_seen_before_the_parents_failure_is_recorded_waits_for_it(
    journal: Journal, tmp_path: Path
) -> None:
    """The forgotten kill seen while the journal still has the parent running that job: the
    child holds (nothing fenced, nothing ended), then runs after the parent's retry."""
    fake = FakeBackend(list(RETRIED))
    fake.dependency_kill_shown_as = (S.CANCELLED, None)
    parent, child, rows = failed_unseen_then_reconciled(journal, fake, tmp_path)
    assert journal.invocations.get(child.id).state is JobState.RUNNING, rows[child.id]
    assert ("fence", f"vibesys-{child.id}-1") not in fake.calls
    journal.leases.release_lease(parent.id, ELSEWHERE)
    for _ in range(4):
        reconcile(engine_of(journal, fake))
    ran_once(journal, fake, child)


def test_a_killed_child_waits_until_its_parents_failure_is_recorded(
    journal: Journal, tmp_path: Path
) -> None:
    """The scheduler killed the child, but the journal still has the parent running that job
    (its live driver has not looked yet): nothing is decided, nothing fenced or submitted."""
    fake = FakeBackend(list(RETRIED))
    _, child, rows = failed_unseen_then_reconciled(journal, fake, tmp_path)
    assert rows[child.id].evidence.startswith("unsatisfiable: "), rows[child.id]
    assert journal.invocations.get(child.id).state is JobState.RUNNING
    assert ("fence", f"vibesys-{child.id}-1") not in fake.calls
    assert fake.submits().count(f"vibesys-{child.id}-1") == 1


def test_a_child_recorded_while_its_parent_retries_waits_for_the_new_attempt(
    journal: Journal, tmp_path: Path
) -> None:
    """Its parent has no job to wait on (between attempts): the child is not submitted (the
    scheduler would kill it at once); the parent's next attempt takes it along."""
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.NODE_FAIL)), FakeAttempt((S.RUNNING,)), WAITS])
    engine = Engine(journal, lambda adapter, request: fake, retry=RetryPolicy(2, 3600.0))
    parent = detached(engine, tmp_path)
    reconcile(engine)  # the node failure is seen: an hour's backoff
    assert journal.invocations.get(parent.id).state is JobState.RETRYING
    child = engine.advance(record(engine, tmp_path, after=parent.id))
    assert child.state is JobState.PREPARED and fake.submits() == [f"vibesys-{parent.id}-1"]
    assert "waits for a job of" in engine.waiting[child.id]
    journal.leases.release_lease(child.id, engine.owner)  # its `run` stopped waiting
    journal.conn.execute("UPDATE invocations SET not_before=NULL WHERE id=?", (parent.id,))
    parent = drive(engine, journal.invocations.get(parent.id), DriveOptions(detach=True))
    assert fake.waits_on[f"vibesys-{child.id}-1"] == parent.job_id
    assert journal.invocations.get(child.id).state is JobState.RUNNING


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
    assert journal.invocations.get(parent.id).exit_code == 1
    assert (child.outcome, child.failure_class) == (
        Outcome.DEPENDENCY_FAILED,
        FailureClass.DEPENDENCY_FAILED,
    )
    assert exit_status(child) == 66
    assert ("cancel", f"vibesys-{child.id}-1") in fake.calls, "its pending job is cancelled"
    history = {h.event: h.evidence for h in journal.invocations.history(child.id)}
    assert f"{parent.id}, ended APPLICATION_FAILED" in history["CancelRequested"]["by"]
    assert "so its command never ran" in history["Finished"]["observation"]
    assert journal.invocations.history(child.id)[-1].evidence["outcome"] == "DEPENDENCY_FAILED"


def test_a_child_killed_with_a_parent_that_failed_for_good_ends_dependency_failed(
    journal: Journal, tmp_path: Path
) -> None:
    """Nobody watched: the parent failed for good and the scheduler killed the child. The
    next look fences the child's attempt and ends it DEPENDENCY_FAILED (exit 66): nothing
    cancelled, nothing submitted again."""
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.FAILED), exit_code=1), WAITS])
    engine = engine_of(journal, fake)
    parent = detached(engine, tmp_path)
    driven_elsewhere(journal, parent)
    child = detached(engine, tmp_path, after=parent.id)
    journal.leases.release_lease(parent.id, ELSEWHERE)
    for _ in range(3):
        reconcile(engine)
    child = journal.invocations.get(child.id)
    assert journal.invocations.get(parent.id).outcome is Outcome.APPLICATION_FAILED
    assert (child.outcome, exit_status(child), child.retries) == (Outcome.DEPENDENCY_FAILED, 66, 0)
    assert history(journal, child)[3:] == ["FenceIntended", "ParentAttemptFailed", "ParentFailed"]
    assert ("cancel", f"vibesys-{child.id}-1") not in fake.calls
    assert fake.submits().count(f"vibesys-{child.id}-1") == 1 and len(fake.submits()) == 2
    assert verify_journal(journal) == []


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
    [event] = [h for h in journal.invocations.history(child.id) if h.event == "ParentFailed"]
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
    assert (
        drive(engine, journal.invocations.get(parent.id), DriveOptions()).outcome
        is not Outcome.COMPLETED
    )
    child = engine.advance(journal.invocations.get(child.id))
    assert (child.state, child.outcome) == (JobState.DONE, Outcome.DEPENDENCY_FAILED)
    assert [h.event for h in journal.invocations.history(child.id)] == [
        "SubmitIntended",
        "ParentFailed",
    ]
    assert fake.submits() == [f"vibesys-{parent.id}-1"]
