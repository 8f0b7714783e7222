"""Chains (`vibesys run --after PARENT`): a child depends on its parent invocation, not on the
attempt that happened to be current when the child was recorded.

Each attempt of a child waits in the scheduler on one job of the parent (Slurm `afterok`, with
`--kill-on-invalid-dep=yes`): the parent's current job, or none once the parent has completed.
The scheduler owns the chain: a child starts a second after the parent's job succeeds, with
nobody watching, and is killed within a second when that job fails, never left waiting for
good. What happens next is the planner's (`engine/plan.py`): the killed attempt is fenced (its
command can never start late) and, its parent's job having failed, it waits for the parent's
next attempt without spending a retry, or ends DEPENDENCY_FAILED once the parent has failed for
good. A child is never submitted while its parent has no job to wait on.

The job each attempt waits on is kept in its provenance (`after`, `after_job`), so `journal
show` says what it waited on and the planner knows whether that job is the parent's current.
Who moves a child on: the process that submits the parent's next attempt (`submit_children`),
else whoever looks at the child (its own `run`, `wait`, `reconcile`), carrying the parent a
step first when nobody drives it (the planner's `CarryOn`, carried out by `Engine.carry_on`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from vibesys.engine.records import record_provenance
from vibesys.errors import BackendError, VibesysError
from vibesys.journal_schema import Invocation
from vibesys.states import FailureClass, JobState, Outcome

if TYPE_CHECKING:
    from vibesys.adapters.requests import AdapterRequest
    from vibesys.engine.core import Engine

__all__ = [
    "CARRY_AHEAD_SECONDS",
    "NO_JOB",
    "QUEUE_PAUSE_SECONDS",
    "carry_ahead",
    "carry_on_ahead",
    "live_job",
    "parent_id",
    "parent_job_of",
    "parent_of",
    "submit_after",
    "submit_children",
]

#: how often an invocation waiting in its campaign's queue looks whether its turn has come
QUEUE_PAUSE_SECONDS: Final = 1.0
#: how often a waiting driver carries on the invocation ahead of it that nobody drives (its
#: status is asked each time: a scheduler's poll budget, not every pause)
CARRY_AHEAD_SECONDS: Final = 5.0

#: States of a child that a parent's new job may move on: held before a submission, or
#: submitted on a job of the parent that has failed since (the scheduler killed it).
_MOVED_ON = (JobState.PREPARED, JobState.RETRYING, JobState.RUNNING, JobState.UNRESOLVED)


#: The parent's job a child waits on once the parent has completed: none.
NO_JOB = "none"


def parent_job_of(parent: Invocation) -> str | None:
    """The parent's job a child submitted now waits on: its current attempt's, NO_JOB once
    it has completed; None while it has none (between attempts, or failed)."""
    if parent.state is JobState.DONE:
        return NO_JOB if parent.outcome is Outcome.COMPLETED else None
    return live_job(parent)


def live_job(parent: Invocation) -> str | None:
    """The parent's job that may still succeed, as far as the journal knows."""
    if parent.state in (JobState.RUNNING, JobState.UNRESOLVED):
        return parent.job_id
    if parent.state is JobState.COLLECTING and parent.failure_class is FailureClass.COMPLETED:
        return parent.job_id
    return None


def parent_id(engine: Engine, inv: Invocation) -> str | None:
    try:
        return engine.adapters.request_of(inv).runs_after()
    except Exception:  # a request that no longer parses fails where it is used, not here
        return None


def parent_of(engine: Engine, inv: Invocation) -> Invocation | None:
    """The invocation `inv` runs after, as the journal has it now."""
    found = parent_id(engine, inv)
    if found is None:
        return None
    try:
        return engine.journal.invocations.get(found)
    except VibesysError:
        return None


def submit_after(engine: Engine, inv: Invocation, request: AdapterRequest) -> str | None:
    """The parent's job one submission of `inv` waits on, as it is now (recorded with the
    attempt); None: it waits on nothing."""
    parent = parent_of(engine, inv)
    if parent is None:
        return request.recorded_parent_job()
    # The planner submits only while the parent has a job to wait on; were it gone since,
    # the last one makes the scheduler kill the child at once, and the planner sees that.
    target = parent_job_of(parent) or parent.job_id or _last_job(engine, parent)
    if target is None:
        return request.recorded_parent_job()
    record_provenance(engine, inv, {"after": parent.id, "after_job": target})
    return None if target == NO_JOB else target


def _last_job(engine: Engine, parent: Invocation) -> str | None:
    jobs = [a.job_id for a in engine.journal.invocations.attempts(parent.id) if a.job_id]
    return jobs[-1] if jobs else None


def carry_ahead(head: Invocation | None, parent: Invocation | None, owner: str) -> list[str]:
    """What a driver whose invocation waits carries on: the first invocation ahead of it in
    its campaign's queue when no live process drives it (the queue never waits on nobody; one
    whose client must go with its driver is left to reconcile), and its parent when it waits
    for the parent's next job and nobody drives the parent."""
    carried = []
    if head is not None and head.lease_owner != owner and not head.settings.cancel_when_orphaned:
        carried.append(head.id)
    if parent is not None and parent.state is not JobState.DONE and parent.lease_owner != owner:
        carried.append(parent.id)
    return carried


def carry_on_ahead(engine: Engine, inv: Invocation) -> float:
    """Carry on what `inv` waits for when nobody drives it (`carry_ahead`): the first
    invocation ahead of it in its campaign's queue, and its parent. The seconds until this is
    due again: sooner when the head's deadline comes first, or its timeout's cancel was just
    sent (its end is seen soon after, once)."""
    place = engine.journal.queue.queue_place(inv.id)
    ahead = place.ahead[0] if place is not None and place.ahead else None
    head = None if ahead is None else engine.journal.invocations.get(ahead)
    pause = CARRY_AHEAD_SECONDS
    for other in carry_ahead(head, parent_of(engine, inv), engine.owner):
        carried = engine.carry_on(other)
        if carried is None:
            continue
        if head is None or other != head.id:  # held for its parent's next job
            if carried.failed is not None:
                why = f"its parent {other} could not be carried on"
                engine.notes[inv.id] = f"{why}: {carried.failed}"
            continue
        if isinstance(carried.failed, BackendError):
            engine.notes[head.id] = f"carrying it on failed: {carried.failed.evidence}"
        elif carried.failed is not None:
            raise carried.failed
        if carried.timed_out:
            pause = QUEUE_PAUSE_SECONDS
        elif carried.deadline is not None and not head.cancel_requested:
            pause = min(CARRY_AHEAD_SECONDS, max(carried.deadline.left(engine.clock()), 0.0))
    return pause


def submit_children(engine: Engine, parent: Invocation, active: list[Invocation]) -> None:
    """The parent's new attempt has a job: every child nobody drives is carried on now (one
    held for it is submitted to wait on it; one killed on the failed job is fenced first),
    by the process that submitted the attempt. A child this process drives already, or
    another live one does, is moved on by its driver."""
    for child in active:
        if child.state not in _MOVED_ON or child.lease_owner == engine.owner:
            continue
        if parent_id(engine, child) != parent.id:
            continue
        carried = engine.carry_on(child.id)
        if carried is not None and carried.failed is not None:
            why = f"not carried on after {parent.id}'s new attempt: {carried.failed}"
            engine.note(child, why)
