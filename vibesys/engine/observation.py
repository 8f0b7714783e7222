"""What the planner decides by besides the invocation and its observation, built once as
data before each plan call (`observed_context`): the time, the retry policy recorded with it,
its queue place and, for a chain (`--after`), its parent as the journal has it now with the
answers about it derived here (has it failed, has the job this attempt waited on failed, which
job would a submission wait on now). The planner reads these fields; it never asks back.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from msgspec import Struct

from vibesys.adapters.base import RemoteStatus
from vibesys.engine.chains import NO_JOB, live_job, parent_job_of, parent_of
from vibesys.engine.observe import seen_error, seen_status
from vibesys.engine.records import record_provenance
from vibesys.engine.seen import Deadline, Seen
from vibesys.errors import BackendError
from vibesys.journal_schema.recorded_evaluations import CLIENT_RUN, RecordedEvaluation
from vibesys.journal_schema.records import Invocation
from vibesys.journal_schema.settings import Settings
from vibesys.states import JobState, Outcome
from vibesys.states.events import TIMEOUT_CANCEL

if TYPE_CHECKING:
    from vibesys.engine.core import Engine
    from vibesys.journal_schema.queue import QueuePlace

__all__ = [
    "PlanContext",
    "RetryPolicy",
    "deadline_of",
    "look",
    "observed_context",
    "plan_context",
    "policy_of",
    "seen_of",
    "settings_of",
    "waited_on",
]

# -- the job's status ------------------------------------------------------------------------


def look(engine: Engine, inv: Invocation, *, hurry: bool = False) -> Seen | None:
    """The adapter's view of `inv`'s attempt: its end as this process saw it happen (its
    srun returned), else for a shared site the site's round (None when no round newer than
    this process's last view of this version exists yet; `hurry`: a cancel waits, ask for
    the round soon), else one status call."""
    backend = engine.adapters.backend(inv)
    shared = backend.shared_polling()
    if shared is not None and hurry and inv.cancel_requested:
        engine.shared.hurry(inv, shared)
    ref = engine.adapters.job_ref(inv)
    own = backend.sees_its_own_end()
    status = None if own is None else own.ended_here(ref)
    if status is None:
        if shared is not None:
            return engine.shared.observe(inv, shared)
        try:
            status = backend.status([ref])[ref.job_name]
        except BackendError as exc:
            return seen_error(exc)
    return seen_of(engine, inv, status)


def seen_of(engine: Engine, inv: Invocation, status: RemoteStatus) -> Seen:
    """The planner's view of one status; where the attempt runs is recorded on the way."""
    if status.provenance:
        record_provenance(engine, inv, status.provenance)
    return seen_status(status)


# -- retries: pure arithmetic, no sleeping ---------------------------------------------------


class RetryPolicy(Struct, frozen=True):
    """Only infrastructure failures are retried, at most `max_retries` times."""

    max_retries: int = 2
    initial_delay_seconds: float = 2.0
    backoff: float = 2.0
    max_delay_seconds: float = 300.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.initial_delay_seconds < 0 or self.max_delay_seconds < 0:
            raise ValueError("retry delays must be >= 0")
        if self.backoff < 1:
            raise ValueError("backoff must be >= 1")


def policy_of(max_retries: int, settings: Settings) -> RetryPolicy:
    """The retry policy recorded with an invocation (its budget and its settings)."""
    return RetryPolicy(
        max_retries,
        settings.retry_delay_seconds,
        settings.retry_backoff,
        settings.retry_max_delay_seconds,
    )


def settings_of(
    retry: RetryPolicy, unreachable_timeout: timedelta, cancel_when_orphaned: bool
) -> Settings:
    """The settings recorded with a new invocation: every process carries it on with them."""
    return Settings(
        retry_delay_seconds=retry.initial_delay_seconds,
        retry_backoff=retry.backoff,
        retry_max_delay_seconds=retry.max_delay_seconds,
        unreachable_timeout_seconds=unreachable_timeout.total_seconds(),
        cancel_when_orphaned=cancel_when_orphaned,
    )


# -- the deadline recorded with a bridge evaluation ------------------------------------------
# An invocation's deadline (a bridge evaluation's, recorded once with its request: first
# acceptance plus the timeout that applies) is cancelled at the second its timeout is over,
# wherever the job is then; the cancel's `by` marks it as the timeout's (a scheduler's own limit
# is whole minutes and ends the job with its own state). The bridge's own thread cancels at the
# second; any other driver (`drive`, a queue carrying on its head, `reconcile`) on its next
# round past the deadline, so a dead bridge never leaves it running past its time.


def deadline_of(row: RecordedEvaluation) -> Deadline | None:
    """The deadline a bridge request's row records, or a client submission's (its `timeout`,
    counted from its recording, as its handle counts it); None when it has no timeout."""
    seconds: float = int(row.body.get("effective_timeout_seconds") or 0)
    if row.run_id == CLIENT_RUN:
        seconds = float(row.body.get("timeout") or 0)
    if seconds <= 0:
        return None
    return Deadline(row.created_at + timedelta(seconds=seconds), f"{TIMEOUT_CANCEL} {seconds:g} s")


class PlanContext(Struct, frozen=True):
    """The observation the planner decides by, besides the invocation and its job's status:
    data only (`plan_context` derives the parent's answers once)."""

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
    #: who would carry a parent nobody drives a step on first (the engine's owner); None once
    #: it was carried this step
    carrier: str | None = None
    #: how the parent ended, when it ended without success (this one can never run)
    parent_failed: str | None = None
    #: how the parent's job the current attempt waited on is known to have failed: the parent
    #: has moved on from it (another attempt, a retry pending) or ended without success; None
    #: while it may still succeed, or when it waited on none
    parent_job_failed: str | None = None
    #: the parent's job a submission now would wait on (`parent_job_of`)
    parent_job: str | None = None


def plan_context(
    now: datetime,
    retry: RetryPolicy,
    unreachable_timeout: timedelta = timedelta(0),
    parent: Invocation | None = None,
    queue: QueuePlace | None = None,
    waited_on: str | None = None,
    carrier: str | None = None,
) -> PlanContext:
    """The planner's observation, with the answers about the parent derived once."""
    failed = _parent_failed(parent)
    return PlanContext(
        now,
        retry,
        unreachable_timeout,
        parent,
        queue,
        waited_on,
        carrier,
        failed,
        _parent_job_failed(parent, waited_on, failed),
        None if parent is None else parent_job_of(parent),
    )


def _parent_failed(parent: Invocation | None) -> str | None:
    if parent is None or parent.state is not JobState.DONE:
        return None
    if parent.outcome is Outcome.COMPLETED:
        return None
    return f"the invocation it runs after, {parent.id}, ended {parent.outcome}"


def _parent_job_failed(
    parent: Invocation | None, job: str | None, failed: str | None
) -> str | None:
    if parent is None or job in (None, NO_JOB):
        return None
    if failed:
        return failed
    live = parent.job_id if parent.state is JobState.DONE else live_job(parent)
    if live == job:
        return None
    return f"job {job} of {parent.id}, which it waited on, failed ({parent.state})"


def observed_context(
    engine: Engine, inv: Invocation, carrier: str | None = None, queue: QueuePlace | None = None
) -> PlanContext:
    """What the planner decides `inv`'s next step by, read from the journal now: the time,
    the settings recorded with it (never this process's own), its parent; `queue`, its place
    in its campaign's queue (PREPARED), as the step read it."""
    settings = inv.settings
    parent = parent_of(engine, inv)
    return plan_context(
        engine.clock(),
        policy_of(inv.max_retries, settings),
        timedelta(seconds=settings.unreachable_timeout_seconds),
        parent,
        queue,
        None if parent is None else waited_on(engine, inv),
        carrier,
    )


def waited_on(engine: Engine, inv: Invocation) -> str | None:
    """The parent's job the current attempt of `inv` was submitted to wait on (its recorded
    provenance, read now: another process may have submitted it)."""
    if inv.attempt < 1:
        return None
    for attempt in engine.journal.invocations.attempts(inv.id):
        if attempt.attempt == inv.attempt and "after_job" in attempt.provenance:
            return str(attempt.provenance["after_job"])
    return None
