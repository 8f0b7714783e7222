"""An invocation's deadline: cancelled at the second its timeout is over, wherever it is then
(in the scheduler's queue, running). A scheduler's own limit is whole minutes, and ends the job
with its own state; this cancel is exact, and its `by` text marks it as the timeout's.

A bridge evaluation's deadline is recorded once, with its request (first acceptance plus the
timeout that applies), and read back by whoever drives it: the bridge's own thread cancels at
the second; any other driver (`drive`, a queue carrying on its head, `reconcile`) cancels it
on its next round past the deadline, so a dead bridge never leaves it running past its time.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from vibesys.journal_schema import Invocation, Journal
from vibesys.journal_schema.recorded_evaluations import RecordedEvaluation
from vibesys.states import JobState
from vibesys.states.events import TIMEOUT_CANCEL

__all__ = ["Deadline", "deadline_of", "overdue", "recorded_deadline"]


class Deadline:
    """When an invocation's timeout is over, and the `by` its cancel is recorded with."""

    def __init__(self, at: datetime, timeout_seconds: int) -> None:
        self.at = at
        self.by = f"{TIMEOUT_CANCEL} {timeout_seconds} s"

    def left(self, now: datetime) -> float:
        return (self.at - now).total_seconds()


def deadline_of(row: RecordedEvaluation) -> Deadline | None:
    """The deadline a bridge request's row records; None when it has no timeout."""
    timeout = int(row.body.get("effective_timeout_seconds") or 0)
    if timeout <= 0:
        return None
    return Deadline(row.created_at + timedelta(seconds=timeout), timeout)


def recorded_deadline(journal: Journal, invocation_id: str) -> Deadline | None:
    """The deadline recorded for the invocation (its bridge request's); None without one."""
    row = journal.bridge.recorded_evaluation_of(invocation_id)
    return None if row is None else deadline_of(row)


def overdue(inv: Invocation, deadline: Deadline | None, now: datetime) -> str | None:
    """The cancel's `by` when `inv` is past its deadline and nobody asked for its cancel yet."""
    if deadline is None or inv.cancel_requested or inv.state is JobState.DONE:
        return None
    return deadline.by if deadline.left(now) <= 0 else None
