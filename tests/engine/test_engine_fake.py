"""The engine's decisions, driven against the scripted FakeBackend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from freezegun import freeze_time

from vibesys.adapters.base import RemoteState
from vibesys.adapters.fake import FakeAttempt, FakeBackend
from vibesys.engine import DriveOptions, Engine, RetryPolicy, drive, reconcile
from vibesys.engine.seen import Seen, Sight
from vibesys.errors import BackendUnavailable, SubmitRejected
from vibesys.journal_schema import Journal
from vibesys.states import FailureClass, JobState, Outcome, SubmitDispatched, SubmitIntended

S = RemoteState


def make_engine(journal: Journal, fake: FakeBackend, **kw: object) -> Engine:
    policy = RetryPolicy(max_retries=2, initial_delay_seconds=0.0)
    return Engine(journal, lambda name, options: fake, retry=policy, **kw)  # type: ignore[arg-type]


def run_to_end(engine: Engine, tmp_path: Path) -> object:
    inv = engine.prepare(adapter="fake", command=["x"], run_root=tmp_path / "runs")
    return drive(engine, inv, DriveOptions())


def events(journal: Journal, inv_id: str) -> list[str]:
    return [h.event for h in journal.invocations.history(inv_id)]


def test_completed_goes_through_every_state(journal: Journal, tmp_path: Path) -> None:
    fake = FakeBackend([FakeAttempt((S.PENDING, S.RUNNING, S.COMPLETED), exit_code=0)])
    inv = run_to_end(make_engine(journal, fake), tmp_path)
    assert inv.state is JobState.DONE and inv.outcome is Outcome.COMPLETED  # type: ignore[attr-defined]
    assert [(h.from_state, h.to_state) for h in journal.invocations.history(inv.id)] == [  # type: ignore[attr-defined]
        (JobState.PREPARED, JobState.SUBMITTING),
        (JobState.SUBMITTING, JobState.SUBMITTING),
        (JobState.SUBMITTING, JobState.RUNNING),
        (JobState.RUNNING, JobState.COLLECTING),
        (JobState.COLLECTING, JobState.DONE),
    ]
    assert fake.submits() == [f"vibesys-{inv.id}-1"]  # type: ignore[attr-defined]


def test_application_failure_is_never_retried(journal: Journal, tmp_path: Path) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.FAILED), exit_code=3)])
    inv = run_to_end(make_engine(journal, fake), tmp_path)
    assert inv.outcome is Outcome.APPLICATION_FAILED and inv.exit_code == 3  # type: ignore[attr-defined]
    assert len(fake.submits()) == 1


@pytest.mark.parametrize("state", [S.TIMEOUT, S.OUT_OF_MEMORY])
def test_own_limits_are_application_failures(
    journal: Journal, tmp_path: Path, state: RemoteState
) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING, state), exit_code=None)])
    inv = run_to_end(make_engine(journal, fake), tmp_path)
    assert inv.outcome is Outcome.APPLICATION_FAILED  # type: ignore[attr-defined]
    assert len(fake.submits()) == 1


@pytest.mark.parametrize(
    ("remote", "failure"),
    [
        (S.NODE_FAIL, FailureClass.NODE_FAILED),
        (S.PREEMPTED, FailureClass.PREEMPTED),
        (S.BOOT_FAIL, FailureClass.NODE_FAILED),
        (S.LAUNCH_FAILED, FailureClass.NODE_FAILED),
        (S.ALLOCATION_EXPIRED, FailureClass.ALLOCATION_EXPIRED),
    ],
)
def test_infra_failure_is_retried_then_completes(
    journal: Journal, tmp_path: Path, remote: RemoteState, failure: FailureClass
) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING, remote)), FakeAttempt((S.COMPLETED,))])
    inv = run_to_end(make_engine(journal, fake), tmp_path)
    assert inv.outcome is Outcome.COMPLETED  # type: ignore[attr-defined]
    attempts = journal.invocations.attempts(inv.id)  # type: ignore[attr-defined]
    assert [a.failure_class for a in attempts] == [failure, FailureClass.COMPLETED]
    assert fake.submits() == [a.job_name for a in attempts]
    assert len(set(fake.submits())) == 2


def test_retry_budget_is_bounded(journal: Journal, tmp_path: Path) -> None:
    fake = FakeBackend([FakeAttempt((S.NODE_FAIL,))] * 10)
    inv = run_to_end(make_engine(journal, fake), tmp_path)
    assert inv.state is JobState.DONE and inv.outcome is Outcome.INFRA_FAILED  # type: ignore[attr-defined]
    assert inv.failure_class is FailureClass.NODE_FAILED  # type: ignore[attr-defined]
    assert len(fake.submits()) == 3  # the first attempt and two retries
    assert events(journal, inv.id)[-1] == "RetryBudgetSpent"  # type: ignore[attr-defined]


def test_zero_retries(journal: Journal, tmp_path: Path) -> None:
    fake = FakeBackend([FakeAttempt((S.PREEMPTED,))] * 3)
    engine = make_engine(journal, fake)
    inv = engine.prepare(adapter="fake", command=["x"], max_retries=0, run_root=tmp_path)
    inv = drive(engine, inv, DriveOptions())
    assert inv.outcome is Outcome.INFRA_FAILED and len(fake.submits()) == 1


def test_rejected_request(journal: Journal, tmp_path: Path) -> None:
    fake = FakeBackend([FakeAttempt(submit_error=SubmitRejected("invalid partition nosuch"))])
    inv = run_to_end(make_engine(journal, fake), tmp_path)
    assert inv.outcome is Outcome.REJECTED  # type: ignore[attr-defined]
    assert "nosuch" in journal.invocations.history(inv.id)[-1].evidence["reason"]  # type: ignore[attr-defined]


def test_submit_failure_that_provably_submitted_nothing_is_retried(
    journal: Journal, tmp_path: Path
) -> None:
    error = BackendUnavailable("connection refused", maybe_submitted=False)
    fake = FakeBackend([FakeAttempt(submit_error=error), FakeAttempt((S.COMPLETED,))])
    inv = run_to_end(make_engine(journal, fake), tmp_path)
    assert inv.outcome is Outcome.COMPLETED  # type: ignore[attr-defined]
    assert journal.invocations.attempts(inv.id)[0].failure_class is FailureClass.TRANSPORT_LOST  # type: ignore[attr-defined]


def test_ambiguous_submit_that_went_through_is_adopted_not_resubmitted(
    journal: Journal, tmp_path: Path
) -> None:
    timeout = BackendUnavailable("sbatch timed out", maybe_submitted=True)
    fake = FakeBackend(
        [FakeAttempt((S.COMPLETED,), submit_error=timeout, submitted_despite_error=True)]
    )
    inv = run_to_end(make_engine(journal, fake), tmp_path)
    assert inv.outcome is Outcome.COMPLETED  # type: ignore[attr-defined]
    assert len(fake.submits()) == 1
    history = journal.invocations.history(inv.id)  # type: ignore[attr-defined]
    assert [h.event for h in history][:4] == [
        "SubmitIntended",
        "SubmitDispatched",
        "OutcomeUnknown",
        "Submitted",
    ]
    assert "found by name" in history[3].evidence["observation"]
    assert journal.invocations.attempts(inv.id)[0].job_id == "1000"  # type: ignore[attr-defined]


def test_ambiguous_submit_with_no_answer_is_unresolved(journal: Journal, tmp_path: Path) -> None:
    timeout = BackendUnavailable("sbatch timed out", maybe_submitted=True)
    fake = FakeBackend(
        [FakeAttempt((S.COMPLETED,), submit_error=timeout, submitted_despite_error=True)]
    )
    fake.status_error = BackendUnavailable("slurmctld not responding")
    inv = run_to_end(make_engine(journal, fake), tmp_path)
    assert inv.state is JobState.UNRESOLVED  # type: ignore[attr-defined]
    assert "sbatch timed out" in journal.invocations.history(inv.id)[-1].evidence["observation"]  # type: ignore[attr-defined]
    assert "fence" not in [kind for kind, _ in fake.calls], "nothing is fenced on silence"
    # Later the scheduler answers: reconcile finds the job and finishes, still one submit.
    fake.status_error = None
    rows = reconcile(make_engine(journal, fake))
    assert rows[0].after is JobState.DONE
    assert journal.invocations.get(inv.id).outcome is Outcome.COMPLETED  # type: ignore[attr-defined]
    assert len(fake.submits()) == 1


# It takes milliseconds; a driver that holds for good must fail soon, not at the suite's bound.
@pytest.mark.timeout(15)
def test_unknown_is_never_success(journal: Journal, tmp_path: Path) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.UNKNOWN))])
    inv = run_to_end(make_engine(journal, fake), tmp_path)
    assert inv.state is JobState.UNRESOLVED and inv.outcome is None  # type: ignore[attr-defined]


def test_reconcile_is_idempotent_on_unresolved(journal: Journal, tmp_path: Path) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.UNKNOWN))])
    inv = run_to_end(make_engine(journal, fake), tmp_path)
    before = journal.invocations.history(inv.id)  # type: ignore[attr-defined]
    for _ in range(3):
        rows = reconcile(make_engine(journal, fake))
        assert [(r.before, r.after) for r in rows] == [(JobState.UNRESOLVED,) * 2]
    assert journal.invocations.history(inv.id) == before  # type: ignore[attr-defined]
    assert len(fake.submits()) == 1


def test_cancel_while_running(journal: Journal, tmp_path: Path) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING,))])
    engine = make_engine(journal, fake)
    inv = engine.prepare(adapter="fake", command=["x"], run_root=tmp_path)
    inv = drive(engine, inv, DriveOptions(detach=True))
    assert inv.state is JobState.RUNNING
    inv = engine.request_cancel(inv, "test")
    assert inv.cancel_requested and inv.state is JobState.RUNNING
    assert journal.leases.acquire_lease(inv.id, engine.owner, timedelta(seconds=30))
    inv = drive(engine, inv, DriveOptions())
    assert inv.outcome is Outcome.CANCELLED
    names = [k for k, _ in fake.calls]
    assert names.index("cancel") > names.index("submit")
    assert events(journal, inv.id)[-3:] == ["CancelRequested", "Finished", "Collected"]


def test_cancel_before_submission_submits_nothing(journal: Journal, tmp_path: Path) -> None:
    fake = FakeBackend()
    engine = make_engine(journal, fake)
    inv = engine.prepare(adapter="fake", command=["x"], run_root=tmp_path)
    inv = engine.request_cancel(inv, "test")
    assert inv.state is JobState.DONE and inv.outcome is Outcome.CANCELLED
    assert fake.submits() == []


def test_retry_waits_for_backoff(journal: Journal, tmp_path: Path) -> None:
    fake = FakeBackend([FakeAttempt((S.NODE_FAIL,)), FakeAttempt((S.COMPLETED,))])
    policy = RetryPolicy(max_retries=2, initial_delay_seconds=60.0)
    engine = Engine(journal, lambda name, options: fake, retry=policy)  # type: ignore[arg-type,return-value]
    with freeze_time("2026-01-01 00:00:00") as clock:
        inv = engine.prepare(adapter="fake", command=["x"], run_root=tmp_path)
        inv = engine.advance(inv)
        inv = engine.advance(inv)
        assert inv.state is JobState.RETRYING
        assert inv.not_before == datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
        clock.tick(59)
        assert engine.advance(inv).state is JobState.RETRYING
        assert len(fake.submits()) == 1
        clock.tick(2)
        inv = engine.advance(engine.journal.invocations.get(inv.id))
        assert len(fake.submits()) == 2
        assert inv.state in (JobState.RUNNING, JobState.DONE)


def test_reconcile_batches_status_per_adapter(journal: Journal, tmp_path: Path) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING,))] * 5)
    engine = make_engine(journal, fake)
    ids = []
    for _ in range(5):
        inv = engine.prepare(adapter="fake", command=["x"], run_root=tmp_path)
        ids.append(drive(engine, inv, DriveOptions(detach=True)).id)
    fake.calls.clear()
    rows = reconcile(make_engine(journal, fake))
    assert {r.invocation_id for r in rows} == set(ids)
    status_calls = [c for c in fake.calls if c[0] == "status"]
    assert len(status_calls) == 1 and len(status_calls[0][1].split(",")) == 5


def test_reconcile_leaves_live_leases_alone(journal: Journal, tmp_path: Path) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING,))])
    engine = make_engine(journal, fake, owner="otherhost:1:1")
    inv = engine.prepare(adapter="fake", command=["x"], run_root=tmp_path)
    rows = reconcile(make_engine(journal, fake))
    assert rows[0].after is JobState.PREPARED and "leased" in rows[0].evidence
    assert fake.submits() == []
    with freeze_time(journal.invocations.get(inv.id).lease_expires_at) as clock:
        clock.tick(1)
        rows = reconcile(make_engine(journal, fake))
    assert rows[0].after is JobState.RUNNING


def test_unreachable_past_the_deadline_is_unresolved_then_reconciled(
    journal: Journal, tmp_path: Path
) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.COMPLETED))])
    engine = make_engine(journal, fake)
    inv = engine.prepare(adapter="fake", command=["x"], run_root=tmp_path)
    inv = drive(engine, inv, DriveOptions(detach=True))
    fake.status_error = BackendUnavailable("ssh: connection refused")
    assert journal.leases.acquire_lease(inv.id, engine.owner, timedelta(seconds=30))
    engine.unreachable_timeout = timedelta(seconds=0.2)
    inv = drive(engine, inv, DriveOptions())
    assert inv.state is JobState.UNRESOLVED
    assert "connection refused" in journal.invocations.history(inv.id)[-1].evidence["observation"]
    fake.status_error = None  # the cluster is back: a later reconcile finishes the job
    rows = reconcile(make_engine(journal, fake))
    assert rows[0].after is JobState.DONE
    assert journal.invocations.get(inv.id).outcome is Outcome.COMPLETED
    assert len(fake.submits()) == 1, "an unreachable cluster never causes a resubmit"


def test_a_job_still_starting_after_a_crash_is_waited_for(journal: Journal, tmp_path: Path) -> None:
    """A lookup that finds the launch under way (no job id yet) neither resubmits nor gives up."""
    fake = FakeBackend([FakeAttempt((S.COMPLETED,))])
    engine = make_engine(journal, fake)
    inv = engine.prepare(adapter="fake", command=["x"], run_root=tmp_path)
    name = f"vibesys-{inv.id}-1"
    inv = engine.journal.commit_transition(inv, SubmitIntended(1, name))[0]
    inv = engine.journal.commit_transition(inv, SubmitDispatched(1, name))[0]
    starting = Seen(Sight.STARTING, "launched, not yet claimed")
    survivor = make_engine(journal, fake)
    assert survivor.advance(inv, starting).state is JobState.SUBMITTING
    assert fake.submits() == [] and "fence" not in [kind for kind, _ in fake.calls]


def test_invocation_ids_sort_by_creation_and_stay_distinct() -> None:
    # Ids sort as they were made (the journal's b-trees append instead of splitting random
    # pages); the random tail keeps ids of one millisecond apart.
    from vibesys.engine import new_invocation_id

    with freeze_time("2026-12-01 00:00:00", tick=False) as clock:
        made = []
        for _ in range(50):
            same_ms = {new_invocation_id() for _ in range(20)}
            assert len(same_ms) == 20
            made.append(min(same_ms))
            clock.tick(timedelta(milliseconds=5))  # freezegun's clock is a float
    assert made == sorted(made) and len(set(made)) == len(made)
    assert all(len(i) == 16 and int(i, 16) >= 0 and i == i.lower() for i in made)
    assert made[0].startswith(f"{1_796_083_200_000:011x}")
