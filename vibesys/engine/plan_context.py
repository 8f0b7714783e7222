"""What the planner decides by besides the invocation and its observation: the time, the
policy recorded with it, its queue place and, for a chain (`--after`), its parent as the
journal has it now. Pure: the answers about the parent are derived here, once."""

from __future__ import annotations

from datetime import datetime, timedelta

from msgspec import Struct

from vibesys.engine.retry import RetryPolicy
from vibesys.journal_schema.queue import QueuePlace
from vibesys.journal_schema.records import Invocation
from vibesys.states import FailureClass, JobState, Outcome

__all__ = ["NO_JOB", "PlanContext", "parent_job_of"]

#: The parent's job a child waits on once the parent has completed: none.
NO_JOB = "none"


def parent_job_of(parent: Invocation) -> str | None:
    """The parent's job a child submitted now waits on: its current attempt's, NO_JOB once
    it has completed; None while it has none (between attempts, or failed)."""
    if parent.state is JobState.DONE:
        return NO_JOB if parent.outcome is Outcome.COMPLETED else None
    return _live_job(parent)


def _live_job(parent: Invocation) -> str | None:
    """The parent's job that may still succeed, as far as the journal knows."""
    if parent.state in (JobState.RUNNING, JobState.UNRESOLVED):
        return parent.job_id
    if parent.state is JobState.COLLECTING and parent.failure_class is FailureClass.COMPLETED:
        return parent.job_id
    return None


class PlanContext(Struct, frozen=True):
    now: datetime
    retry: RetryPolicy
    #: how long a scheduler may stay unreachable before a running job's outcome is unknown
    unreachable_timeout: timedelta = timedelta(0)
    #: the invocation this one runs after (`--after`), as the journal has it now
    parent: Invocation | None = None
    #: its place in its campaign's queue (PREPARED only): submitted when nothing is ahead
    queue: QueuePlace | None = None
    #: the parent's job the current attempt waited on (`after_job`), when it had a parent
    waited_on: str | None = None

    def parent_failed(self) -> str | None:
        """How the parent ended, when it ended without success (this one can never run)."""
        parent = self.parent
        if parent is None or parent.state is not JobState.DONE:
            return None
        if parent.outcome is Outcome.COMPLETED:
            return None
        return f"the invocation it runs after, {parent.id}, ended {parent.outcome}"

    def parent_job_failed(self) -> str | None:
        """How the parent's job the current attempt waited on is known to have failed: the
        parent has moved on from it (another attempt, a retry pending) or ended without
        success. None while it may still succeed, or when it waited on none."""
        parent, job = self.parent, self.waited_on
        if parent is None or job in (None, NO_JOB):
            return None
        if failed := self.parent_failed():
            return failed
        live = parent.job_id if parent.state is JobState.DONE else _live_job(parent)
        if live == job:
            return None
        return f"job {job} of {parent.id}, which it waited on, failed ({parent.state})"

    def waits_for_parent(self, inv: Invocation) -> str | None:
        """Why `inv` is not submitted yet: its parent has no job to wait on now, or (an
        attempt that never ran because the parent's job failed) still the same one."""
        parent = self.parent
        if parent is None:
            return None
        job = parent_job_of(parent)
        if job is None:
            return f"waits for a job of {parent.id} to run after ({parent.state})"
        if inv.failure_class is FailureClass.DEPENDENCY_FAILED and job == self.waited_on:
            return f"waits for the next attempt of {parent.id}: job {job} failed"
        return None
