"""The planner: from the journal's record of an invocation, the latest observation of its job
and the facts read with it (`PlanContext`, data: the time, the parent's answers), the one next
step. Pure: no I/O, no clock, and it never asks back.

A step is one of:
- `Commit(event)`: commit this transition; the engine then carries out exactly the effects
  `decide()` returns for it (write-ahead);
- `Redo(effect)`: carry out again an idempotent effect that an earlier committed transition
  authorized and a crash (or a lost connection) interrupted: collect, cancel;
- `Hold(why)`: nothing can be decided now; look again later;
- `CarryOn(invocation_id)`: step another invocation first, through the same door, then plan
  again (a held child's parent that nobody drives; the driver asks it for the invocation
  ahead in its campaign's queue, `chains.carry_on_ahead`).

It also maps what an effect showed (`engine/seen.py`) to the event that records it (`proven`),
decides what a cancel commits (`plan_cancel`; `orphaned`: a client gone with its driver), and
tells a driver whose invocation's fate stays open whether to follow it on (`follow`).

Two rules shape every row. Silence is not absence: an attempt whose job nobody can see is
retired only by a fence that won (`FenceIntended`), never because a lookup came back empty.
And an attempt is submitted only once: after `SubmitDispatched` no path leads to a second
submit of the same attempt. `vibesys states --format reconcile` prints every decision.
"""

from __future__ import annotations

from datetime import timedelta

from msgspec import Struct

from vibesys.engine.observation import PlanContext
from vibesys.engine.seen import (
    ClaimRead,
    ErrorFacts,
    Fact,
    Gathered,
    Receipt,
    Seen,
    Sight,
    SubmitFailed,
)
from vibesys.journal_schema.clock import iso
from vibesys.journal_schema.records import Invocation
from vibesys.states import (
    OUTCOME_OF,
    Cancel,
    Cancelled,
    CancelRequested,
    Collect,
    Collected,
    Effect,
    Event,
    FailureClass,
    FenceIntended,
    Finished,
    InfraFailed,
    JobState,
    Misconfigured,
    OutcomeUnknown,
    ParentAttemptFailed,
    ParentFailed,
    Rejected,
    RetryBudgetSpent,
    SubmitDispatched,
    SubmitIntended,
    Submitted,
)

__all__ = [
    "CarryOn",
    "Commit",
    "Follow",
    "Hold",
    "PlanContext",
    "Redo",
    "Step",
    "follow",
    "needs_observation",
    "orphaned",
    "plan",
    "plan_cancel",
    "proven",
]


class Commit(Struct, frozen=True):
    event: Event


class Redo(Struct, frozen=True):
    effect: Effect


class Hold(Struct, frozen=True):
    why: str


class CarryOn(Struct, frozen=True):
    invocation_id: str


Step = Commit | Redo | Hold | CarryOn


def _parent_to_carry(seen: Seen | None, ctx: PlanContext) -> CarryOn | None:
    """The parent of a child its scheduler holds (queued on the parent's job, or killed on
    it), to carry a step on first: its next step decides what comes next for the child. Only
    one not done that the carrier does not drive already."""
    parent = ctx.parent
    if ctx.carrier is None or parent is None or seen is None:
        return None
    if seen.sight not in (Sight.QUEUED, Sight.UNSATISFIABLE) and not seen.unnamed_cancel:
        return None
    if parent.state is JobState.DONE or parent.lease_owner == ctx.carrier:
        return None
    return CarryOn(parent.id)


def needs_observation(inv: Invocation) -> bool:
    """Whether the next step of `inv` depends on the adapter's view of its job."""
    if inv.state is JobState.SUBMITTING:
        return inv.dispatched
    return inv.state in (JobState.RUNNING, JobState.UNRESOLVED)


def plan(inv: Invocation, seen: Seen | None, ctx: PlanContext) -> Step:
    """The next step for `inv`, given `seen` (None when it needs no observation)."""
    if (carry := _parent_to_carry(seen, ctx)) is not None:
        return carry
    waits = _waits_for_parent(inv, ctx)  # a submission's precondition
    match inv.state:
        case JobState.SUBMITTING if inv.dispatched:
            return _unsettled(inv, _need(seen), ctx)
        case JobState.RUNNING:
            return _running(inv, _need(seen), ctx)
        case JobState.UNRESOLVED:
            return _unsettled(inv, _need(seen), ctx)
        case JobState.COLLECTING:
            return _collecting(inv)
        case JobState.RETRYING:
            return _retrying(inv, ctx, waits)
        case JobState.PREPARED:
            if failed := ctx.parent_failed:
                return Commit(ParentFailed(_parent_id(ctx), f"{failed}: nothing submitted"))
            if ctx.queue is not None and ctx.queue.ahead:
                return Hold(ctx.queue.describe())
            if waits:
                return Hold(waits)
            return Commit(SubmitIntended(1, inv.attempt_job_name(1)))
        case JobState.SUBMITTING:  # its intent recorded, nothing sent yet
            if inv.cancel_requested:
                return Commit(Cancelled("cancelled before the submission began: nothing sent"))
            if failed := ctx.parent_failed:
                return Commit(ParentFailed(_parent_id(ctx), f"{failed}: nothing submitted"))
            return Commit(SubmitDispatched(inv.attempt, inv.attempt_job_name(inv.attempt)))
    return Hold("done")


def _need(seen: Seen | None) -> Seen:
    if seen is None:
        raise ValueError("this step needs an observation of the job")
    return seen


def _unsettled(inv: Invocation, seen: Seen, ctx: PlanContext) -> Step:
    """SUBMITTING after dispatch, or UNRESOLVED: does the attempt's job exist, and how is it?"""
    submitting = inv.state is JobState.SUBMITTING
    match seen.sight:
        case Sight.QUEUED | Sight.RUNNING if seen.job_id:
            how = "reattached" if inv.job_id else "found by name"
            return Commit(Submitted(seen.job_id, f"{how}: {seen.evidence}"))
        case Sight.ENDED | Sight.UNSATISFIABLE if seen.job_id and inv.job_id is None:
            # Record the job it found before its end, so the attempt names its job.
            return Commit(Submitted(seen.job_id, f"found by name: {seen.evidence}"))
        case Sight.ENDED:
            return _ended(inv, seen, ctx)
        case Sight.UNSATISFIABLE:
            return _unsatisfiable(inv, seen, ctx)
        case Sight.CLAIMED if seen.job_id and inv.job_id is None:
            return Commit(Submitted(seen.job_id, f"adopted by its claim: {seen.evidence}"))
        case Sight.FENCED:
            return _fenced(inv, seen, ctx)
        case Sight.ABSENT:
            return Commit(FenceIntended(inv.attempt))
        case Sight.STARTING:
            return Redo(Cancel()) if inv.cancel_requested else Hold(f"starting: {seen.evidence}")
    fix = f"; fix: {seen.fix}" if seen.fix else ""
    if submitting:
        return Commit(OutcomeUnknown(f"{seen.named}: {seen.evidence}{fix}"))
    return Hold(f"{seen.named}: {seen.evidence}{fix}")


def _running(inv: Invocation, seen: Seen, ctx: PlanContext) -> Step:
    match seen.sight:
        case Sight.ENDED:
            return _ended(inv, seen, ctx)
        case Sight.UNSATISFIABLE:
            return _unsatisfiable(inv, seen, ctx)
        case Sight.QUEUED | Sight.RUNNING | Sight.STARTING:
            if inv.cancel_requested:
                return Redo(Cancel())
            if seen.sight is Sight.QUEUED and (failed := ctx.parent_failed):
                # It waits on a dependency that can never be satisfied now.
                return Commit(CancelRequested(f"dependency: {failed}"))
            return Hold(f"{seen.sight}: {seen.evidence}")
        case Sight.FENCED:
            return _fenced(inv, seen, ctx)
        case Sight.UNREACHABLE:
            # A refused login (a fix given) is held as an outage is, and named for what it is.
            since = seen.since or ctx.now
            fix = f"; fix: {seen.fix}" if seen.fix else ""
            if ctx.now - since < ctx.unreachable_timeout:
                return Hold(f"{seen.named} since {iso(since)}: {seen.evidence}{fix}")
            return Commit(OutcomeUnknown(f"{seen.named}: {seen.evidence}{fix}"))
        case Sight.BLOCKED:
            return Commit(OutcomeUnknown(f"blocked: {seen.evidence}; fix: {seen.fix}"))
    return Commit(OutcomeUnknown(f"{seen.sight}: {seen.evidence}"))


def _ended(inv: Invocation, seen: Seen, ctx: PlanContext) -> Step:
    failure = seen.failure_class
    assert failure is not None, "an ended job always has a failure class"
    if failure is FailureClass.CANCELLED and (failed := ctx.parent_failed):
        # Cancelled while it waited on its parent, which failed: its command never ran.
        why = f"{seen.evidence}; {failed}, so its command never ran"
        return Commit(Finished(FailureClass.DEPENDENCY_FAILED, None, why))
    if _killed_over_its_dependency(inv, seen, ctx):
        return _unsatisfiable(inv, seen, ctx)
    if failure in OUTCOME_OF:
        return Commit(Finished(failure, seen.exit_code, seen.evidence))
    return Commit(InfraFailed(failure, seen.evidence, _retry_at(inv, ctx)))


def _killed_over_its_dependency(inv: Invocation, seen: Seen, ctx: PlanContext) -> bool:
    """Cancelled before it started, by no one sacct names: Slurm's kill for a dependency that
    failed, read after squeue forgot why. Once the parent's record shows that job failed, a
    fence proves it never ran before it waits for the parent's next attempt; until then it
    holds (and carries the parent on), unless the parent has ended well."""
    if not seen.unnamed_cancel or ctx.parent is None or inv.cancel_requested:
        return False
    return bool(ctx.parent_job_failed) or ctx.parent.state is not JobState.DONE


def _unsatisfiable(inv: Invocation, seen: Seen, ctx: PlanContext) -> Step:
    """The scheduler ended the job before its start, the job it waited on having failed. A
    fence proves it never ran; what then (`_fence_won`) needs the parent's failure on record."""
    if inv.cancel_requested or ctx.parent_job_failed:
        return Commit(FenceIntended(inv.attempt))
    return Hold(
        f"its dependency can never be satisfied, its parent's failure not yet recorded: "
        f"{seen.evidence}"
    )


def _fenced(inv: Invocation, seen: Seen, ctx: PlanContext) -> Step:
    why = f"the attempt is fenced, its command never ran: {seen.evidence}"
    return Commit(_fence_won(inv, why, ctx))


def _fence_won(inv: Invocation, why: str, ctx: PlanContext) -> Event:
    """The fence holds: this attempt's command never ran and never will. Its parent's job
    having failed, the attempt was doomed anyway: no retry is spent on it."""
    if failed := ctx.parent_failed:
        return ParentAttemptFailed(f"{why}; {failed}")
    if inv.cancel_requested:
        return Cancelled(why)
    if failed := ctx.parent_job_failed:
        return ParentAttemptFailed(f"{why}; {failed}")
    return InfraFailed(FailureClass.TRANSPORT_LOST, why, _retry_at(inv, ctx))


def _collecting(inv: Invocation) -> Step:
    ended_by_cancel = (FailureClass.CANCELLED, FailureClass.DEPENDENCY_FAILED)
    if inv.cancel_requested and inv.failure_class not in ended_by_cancel:
        # The job's end is proven already: a cancel only abandons the collection.
        assert inv.failure_class is not None
        return Commit(
            Collected(
                OUTCOME_OF[inv.failure_class],
                inv.exit_code,
                "collection abandoned: cancel requested after the job's end was proven",
            )
        )
    return Redo(Collect())


def _retrying(inv: Invocation, ctx: PlanContext, waits: str | None) -> Step:
    if failed := ctx.parent_failed:
        # Before a cancel: a dependency's cancel is not an interrupt (exit 66, never 130).
        return Commit(ParentFailed(_parent_id(ctx), f"{failed}: no further attempt"))
    if inv.cancel_requested:
        return Commit(Cancelled("cancelled between attempts: nothing running"))
    assert inv.failure_class is not None
    if inv.retries > inv.max_retries:
        return Commit(RetryBudgetSpent(inv.failure_class, inv.retries - 1))
    if inv.not_before and inv.not_before > ctx.now:
        return Hold(f"backoff until {iso(inv.not_before)}")
    if waits:
        return Hold(waits)
    return Commit(SubmitIntended(inv.attempt + 1, inv.attempt_job_name(inv.attempt + 1)))


def _waits_for_parent(inv: Invocation, ctx: PlanContext) -> str | None:
    """Why `inv` is not submitted yet: its parent has no job to wait on now, or (an attempt
    that never ran because the parent's job failed) still the same one."""
    parent, job = ctx.parent, ctx.parent_job
    if parent is None:
        return None
    if job is None:
        return f"waits for a job of {parent.id} to run after ({parent.state})"
    if inv.failure_class is FailureClass.DEPENDENCY_FAILED and job == ctx.waited_on:
        return f"waits for the next attempt of {parent.id}: job {job} failed"
    return None


def _parent_id(ctx: PlanContext) -> str:
    assert ctx.parent is not None
    return ctx.parent.id


def _retry_at(inv: Invocation, ctx: PlanContext) -> str:
    """When the next attempt may start: the recorded policy's backoff for this retry."""
    policy, number = ctx.retry, inv.retries + 1
    delay = policy.initial_delay_seconds * policy.backoff ** max(number - 1, 0)
    return iso(ctx.now + timedelta(seconds=min(delay, policy.max_delay_seconds)))


def proven(inv: Invocation, fact: Fact, ctx: PlanContext) -> Event:
    """The event that records what an effect showed (`execute`'s answer)."""
    match fact:
        case Receipt(job_id=job_id, observation=observation):
            return Submitted(job_id, observation)
        case SubmitFailed(facts=facts):
            return event_for_submit_error(facts, _retry_at(inv, ctx))
        case ClaimRead(fenced=True, description=description):
            why = f"the attempt is fenced, its command never ran ({description})"
            return _fence_won(inv, why, ctx)
        case ClaimRead(job_id=job_id, description=description):
            return Submitted(job_id, f"adopted: the job claimed its attempt first ({description})")
        case Gathered(evidence=evidence):
            assert inv.failure_class is not None
            return Collected(OUTCOME_OF[inv.failure_class], inv.exit_code, evidence)
    raise AssertionError(fact)


def event_for_submit_error(facts: ErrorFacts, not_before: str) -> Event:
    """The decision table for a failed submit, from what the error proves."""
    if facts.rejected:
        return Rejected(facts.reason)
    if facts.maybe_submitted:
        return OutcomeUnknown(f"the submit may have gone through: {facts.reason}")
    if not facts.retryable:
        return Misconfigured(facts.reason, facts.fix)
    return InfraFailed(
        FailureClass.TRANSPORT_LOST, f"submit failed, nothing submitted: {facts.reason}", not_before
    )


def plan_cancel(inv: Invocation, by: str) -> Step:
    """What a cancel requested by `by` commits now: nothing once it is DONE or a cancel is
    already recorded; the settled fact where nothing can be running; else the intent (which
    authorizes the cancel effect)."""
    if inv.state is JobState.DONE:
        return Hold("done")
    if inv.cancel_requested:
        return Hold("a cancel is requested already")
    if inv.state in (JobState.PREPARED, JobState.RETRYING):
        return Commit(Cancelled(f"cancelled by {by}; nothing running"))
    return Commit(CancelRequested(by))


def orphaned(inv: Invocation) -> str | None:
    """Who cancels `inv` when no live process drives it: one whose client went away with its
    driver (the broker's) is cancelled, nobody will read what it produces."""
    if inv.settings.cancel_when_orphaned and not inv.cancel_requested:
        return "reconcile: its client is gone"
    return None


class Follow(Struct, frozen=True):
    """The answer to a driver whose invocation's fate stays open (UNRESOLVED, COLLECTING):
    stop now, or go on; `open_since` is when the driver first saw it open (its own clock)."""

    stop: bool
    open_since: float | None = None


def follow(inv: Invocation, seen: Seen | None, open_since: float | None, now: float) -> Follow:
    """Whether to stop driving `inv`, from the time the driver first saw its fate open and
    now (seconds on one clock): at once when waiting cannot change what was seen, else once
    the unreachable timeout recorded with it has passed."""
    if inv.state not in (JobState.UNRESOLVED, JobState.COLLECTING):
        return Follow(False, None)
    if inv.state is JobState.UNRESOLVED and seen is not None and seen.final:
        return Follow(True, open_since)  # nothing will change by waiting: report it now
    since = open_since or now
    timeout = inv.settings.unreachable_timeout_seconds  # recorded with it, not the driver's
    return Follow(now - since >= timeout, since)
