"""Chains (`vibesys run --after PARENT`): a child depends on its parent invocation, not on the
attempt that happened to be current when the child was recorded.

The child's job waits in the scheduler on one job of the parent (Slurm `afterok`, submitted so
that a failed parent job leaves it pending instead of killed). Which job that is follows the
parent:

- when the child is submitted, it waits on the parent's current job (none once the parent has
  completed: its job may be gone from the controller by then);
- when the parent is retried, every pending child is pointed at the new attempt's job, by the
  process that records the new attempt's job id and again by whoever looks at a child still
  waiting on an older one (a crash between the two leaves nothing behind);
- once the parent has ended without success, the planner cancels a waiting child and records
  it DEPENDENCY_FAILED (`engine/plan.py`), or ends one not yet submitted (ParentFailed).

The job each attempt of a child waits on is kept in its provenance (`after`, `after_job`), so
`journal show` says what it waits on and a process knows whether to move it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Final, Protocol

from vibesys.adapters.base import Backend, JobRef
from vibesys.engine.provenance import ProvenanceKeeper, known_provenance, merge_provenance
from vibesys.errors import BackendError, VibesysError
from vibesys.journal_schema import Invocation
from vibesys.states import JobState, Outcome

if TYPE_CHECKING:
    from vibesys.adapters.requests import AdapterRequest

__all__ = ["follow_children", "follow_parent", "parent_of", "submit_spec"]

#: `after_job` of a child that waits on nothing: its parent had completed.
NO_JOB: Final = "none"
#: States of a parent whose current attempt's job is the one its children must wait on.
_HAS_JOB: Final = (JobState.RUNNING, JobState.UNRESOLVED, JobState.COLLECTING)


class ChainEngine(ProvenanceKeeper, Protocol):
    owner: str
    lease_ttl: timedelta

    def request_of(self, inv: Invocation) -> AdapterRequest: ...

    def advance(self, inv: Invocation) -> Invocation: ...

    def backend(self, inv: Invocation) -> Backend: ...

    def job_ref(self, inv: Invocation) -> JobRef: ...

    def note(self, inv: Invocation, text: str) -> None: ...


def parent_id(engine: ChainEngine, inv: Invocation) -> str | None:
    try:
        return engine.request_of(inv).runs_after()
    except Exception:  # a request that no longer parses fails where it is used, not here
        return None


def parent_of(engine: ChainEngine, inv: Invocation) -> Invocation | None:
    """The invocation `inv` runs after, as the journal has it now."""
    found = parent_id(engine, inv)
    if found is None:
        return None
    try:
        return engine.journal.get(found)
    except VibesysError:
        return None


def _target(parent: Invocation) -> str | None:
    """The parent's job a child should wait on now: its current attempt's, NO_JOB once it has
    completed; None when nothing should change (no job for its new attempt yet, or it failed:
    the planner cancels the child)."""
    if parent.state is JobState.DONE:
        return NO_JOB if parent.outcome is Outcome.COMPLETED else None
    if parent.state in _HAS_JOB and parent.job_id:
        return parent.job_id
    return None


def submit_spec(engine: ChainEngine, inv: Invocation, request: AdapterRequest) -> AdapterRequest:
    """The request one submission of `inv` uses: depending on the parent's job as it is now
    (recorded with the attempt)."""
    parent = parent_of(engine, inv)
    if parent is None:
        return request
    target = _target(parent)
    if target is None:
        # Its new attempt has no job yet, or it failed: wait on its last job (the planner
        # refuses to submit after a failure it knows of; one that comes now leaves the child
        # pending until it is moved or cancelled).
        target = parent.job_id or _last_job(engine, parent)
        if target is None:
            return request
    merge_provenance(engine, inv, {"after": parent.id, "after_job": target})
    return request.with_parent_job(None if target == NO_JOB else target)


def _last_job(engine: ChainEngine, parent: Invocation) -> str | None:
    jobs = [a.job_id for a in engine.journal.attempts(parent.id) if a.job_id]
    return jobs[-1] if jobs else None


def follow_parent(engine: ChainEngine, child: Invocation, *, carry: bool = True) -> None:
    """A pending child whose parent has moved on to another job waits on that one from now on
    (idempotent; a failure is noted and tried again at the next look). With `carry`, a parent
    nobody drives is carried on first, so that its retry, or its end, is seen."""
    parent = parent_of(engine, child)
    if parent is None or child.job_id is None or child.attempt < 1:
        return
    if carry:
        parent = carry_parent(engine, child, parent)
    target = _target(parent)
    waits_on = known_provenance(engine, child).get("after_job")
    if target is None or waits_on == target:
        return
    if target == NO_JOB and waits_on == parent.job_id:
        return  # it waits on the job that completed: the scheduler starts it
    backend = engine.backend(child)
    follower = backend.follows_parent()
    if follower is None:
        return
    try:
        evidence = follower.follow_parent(
            engine.job_ref(child), None if target == NO_JOB else target
        )
    except BackendError as exc:
        engine.note(child, f"the dependency was not moved, will retry: {exc.evidence}")
        return
    merge_provenance(engine, child, {"after": parent.id, "after_job": target})
    what = "no job (its parent completed)" if target == NO_JOB else f"job {target}"
    engine.note(child, f"now waits on {what} of {parent.id}: {evidence}")


def carry_parent(engine: ChainEngine, child: Invocation, parent: Invocation) -> Invocation:
    """One step of the parent when no live process drives it (its lease is free): a child
    waiting in the foreground would otherwise wait for good on a parent that failed, or
    that needs its next attempt submitted."""
    if parent.state is JobState.DONE:
        return parent
    if not engine.journal.acquire_lease(parent.id, engine.owner, engine.lease_ttl):
        return parent  # its driver carries it on
    try:
        return engine.advance(parent)
    except Exception as exc:  # the parent's own row tells; the child goes on waiting
        engine.note(child, f"its parent {parent.id} could not be carried on: {exc}")
        return engine.journal.get(parent.id)
    finally:
        engine.journal.release_lease(parent.id, engine.owner)


def follow_children(engine: ChainEngine, parent: Invocation, children: list[Invocation]) -> None:
    """The parent's new attempt has a job: point every pending child at it (the parent is
    being carried on by this very process: never again from here)."""
    for child in children:
        if child.state in (JobState.RUNNING, JobState.UNRESOLVED) and (
            parent_id(engine, child) == parent.id
        ):
            follow_parent(engine, child, carry=False)
