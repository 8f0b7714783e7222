"""The planner's answers besides the next step (pure): the event an effect's facts prove, what
a cancel commits in each state, who cancels an orphan, and when a driver stops following."""

from __future__ import annotations

from datetime import timedelta

import pytest
from msgspec.structs import replace

from vibesys.engine.observation import RetryPolicy
from vibesys.engine.plan import (
    Commit,
    Hold,
    PlanContext,
    follow,
    orphaned,
    plan,
    plan_cancel,
    proven,
)
from vibesys.engine.plan_table import NOW, SITUATIONS
from vibesys.engine.seen import ClaimRead, ErrorFacts, Gathered, Receipt, Seen, Sight, SubmitFailed
from vibesys.journal_schema import Invocation, Settings
from vibesys.states import (
    Cancelled,
    CancelRequested,
    Collected,
    FailureClass,
    InfraFailed,
    JobState,
    Misconfigured,
    Outcome,
    OutcomeUnknown,
    Rejected,
    Submitted,
)

BY_LABEL = dict(SITUATIONS)
CTX = PlanContext(NOW, RetryPolicy())


def _in(label: str, **facts: object) -> Invocation:
    return replace(BY_LABEL[label], **facts)  # type: ignore[arg-type]


def test_a_submit_receipt_and_its_errors_prove_their_events() -> None:
    inv = _in("SUBMITTING, dispatched, no job id")
    assert proven(inv, Receipt("42", "sbatch: 42"), CTX) == Submitted("42", "sbatch: 42")

    def failed(maybe: bool, retryable: bool, rejected: bool = False) -> object:
        facts = ErrorFacts(maybe, retryable, rejected, "why", "fix")
        return type(proven(inv, SubmitFailed(facts), CTX))

    assert failed(False, False, rejected=True) is Rejected
    assert failed(True, True) is OutcomeUnknown
    assert failed(False, False) is Misconfigured
    assert failed(False, True) is InfraFailed


def test_a_fence_that_won_retries_or_ends_a_cancelled_attempt() -> None:
    inv = _in("UNRESOLVED, no job id")
    won = ClaimRead(True, "", "fenced by me")
    retried = proven(inv, won, CTX)
    assert isinstance(retried, InfraFailed) and retried.failure_class is FailureClass.TRANSPORT_LOST
    assert "fenced by me" in retried.observation
    cancelled = proven(replace(inv, cancel_requested=True), won, CTX)
    assert isinstance(cancelled, Cancelled)
    seen = Seen(Sight.FENCED, "claim: fence", final=True)
    step = plan(replace(inv, cancel_requested=True), seen, CTX)
    assert isinstance(step, Commit) and isinstance(step.event, Cancelled)


def test_a_claim_that_came_first_adopts_the_job() -> None:
    event = proven(_in("UNRESOLVED, no job id"), ClaimRead(False, "77", "job 77"), CTX)
    assert event == Submitted("77", "adopted: the job claimed its attempt first (job 77)")


def test_a_collection_proves_the_recorded_outcome() -> None:
    event = proven(_in("COLLECTING"), Gathered("logs home"), CTX)
    assert event == Collected(Outcome.COMPLETED, 0, "logs home")


@pytest.mark.parametrize("label", [label for label, _ in SITUATIONS])
def test_a_cancel_settles_at_once_only_where_nothing_can_run(label: str) -> None:
    inv = BY_LABEL[label]
    step = plan_cancel(inv, "me")
    assert isinstance(step, Commit)
    if inv.state in (JobState.PREPARED, JobState.RETRYING):
        assert step.event == Cancelled("cancelled by me; nothing running")
    else:
        assert step.event == CancelRequested("me")


def test_a_cancel_commits_nothing_once_done_or_already_requested() -> None:
    assert isinstance(plan_cancel(_in("RUNNING", cancel_requested=True), "me"), Hold)
    assert isinstance(plan_cancel(_in("RUNNING", state=JobState.DONE), "me"), Hold)


def test_only_an_orphan_whose_client_went_with_its_driver_is_cancelled() -> None:
    inv = _in("RUNNING")
    assert orphaned(inv) is None
    mine = replace(inv, settings=Settings(cancel_when_orphaned=True))
    assert orphaned(mine) == "reconcile: its client is gone"
    assert orphaned(replace(mine, cancel_requested=True)) is None


def test_a_driver_stops_following_once_the_recorded_timeout_has_passed() -> None:
    timeout = 600.0
    inv = _in("UNRESOLVED, job id known", settings=Settings(unreachable_timeout_seconds=timeout))
    first = follow(inv, None, None, 1000.0)
    assert first.stop is False and first.open_since == 1000.0
    assert follow(inv, None, first.open_since, 1000.0 + timeout - 1).stop is False
    later = follow(inv, None, first.open_since, 1000.0 + timeout)
    assert later.stop is True and later.open_since == 1000.0
    # A state whose fate is not open forgets when it was.
    assert follow(_in("RUNNING"), None, 1000.0, 5000.0).open_since is None
    assert follow(_in("RUNNING"), None, 1000.0, 5000.0).stop is False


def test_a_driver_stops_at_once_when_waiting_cannot_change_what_it_saw() -> None:
    inv = _in("UNRESOLVED, job id known")
    final = Seen(Sight.CLAIMED, "claimed, process gone", "42", final=True)
    assert follow(inv, final, None, 0.0).stop is True
    open_one = Seen(Sight.UNKNOWN, "sacct lag")
    assert follow(inv, open_one, None, 0.0).stop is False
    # COLLECTING waits the timeout out whatever was seen.
    assert follow(_in("COLLECTING"), final, None, 0.0).stop is False


def test_the_patience_a_driver_follows_by_is_the_recorded_one() -> None:
    inv = _in("UNRESOLVED, no job id", settings=Settings(unreachable_timeout_seconds=5.0))
    assert follow(inv, None, 1.0, 1.0 + timedelta(seconds=5).total_seconds()).stop is True
