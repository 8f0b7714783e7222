"""Events: one frozen record (a msgspec Struct) per fact that can move an invocation.

The class name is the trigger name in the transition table and the `event` column of the
journal's history; the fields are the evidence. Times are ISO-8601 UTC strings supplied by
the engine (this package has no clock).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol

from msgspec import Struct

from vibesys.states.job_state import OUTCOME_OF, RETRYABLE, FailureClass, Outcome


class SubmitIntended(Struct, frozen=True):
    """The engine is about to submit `attempt` under the stable `job_name`."""

    attempt: int
    job_name: str


class SubmitDispatched(Struct, frozen=True):
    """The submission of `attempt` may begin: from here on the job may exist even if nobody
    ever learns its id, so only a lookup or a fence can settle what happened."""

    attempt: int
    job_name: str


class Submitted(Struct, frozen=True):
    """The scheduler accepted the job (or a lookup by name found it)."""

    job_id: str
    observation: str = ""


class Rejected(Struct, frozen=True):
    """The request is invalid; it is proven that nothing runs."""

    reason: str


class Misconfigured(Struct, frozen=True):
    """A configuration or security failure (a changed host key, a refused key, a missing
    candidate, a command the system cannot execute): it is proven that nothing was submitted,
    and retrying cannot help until a person applies `fix`."""

    reason: str
    fix: str = ""


class ParentFailed(Struct, frozen=True):
    """The invocation this one runs after (`parent`) ended without success before this one
    was submitted: it is proven that nothing was or will be submitted."""

    parent: str
    observation: str = ""


class FenceIntended(Struct, frozen=True):
    """The engine is about to fence `attempt`: claim its job's attempt directory so that its command
    can never start, unless the job has claimed it first."""

    attempt: int


class ParentAttemptFailed(Struct, frozen=True):
    """This attempt's job waited on a job of its parent that failed, and the fence proves its
    command never ran and never will (the scheduler killed it before it started). The
    invocation waits for its parent's next attempt, or its end; no retry is spent."""

    observation: str


class OutcomeUnknown(Struct, frozen=True):
    """The remote state cannot be proven; the observation says why."""

    observation: str


class Finished(Struct, frozen=True):
    """The job reached a terminal state that is not an infrastructure failure."""

    failure_class: FailureClass
    exit_code: int | None
    observation: str = ""

    def __post_init__(self) -> None:
        if self.failure_class not in OUTCOME_OF:
            raise ValueError(f"Finished cannot carry {self.failure_class}: use InfraFailed")


class InfraFailed(Struct, frozen=True):
    """The infrastructure failed and it is proven that nothing of this attempt runs."""

    failure_class: FailureClass
    observation: str
    not_before: str = ""

    def __post_init__(self) -> None:
        if self.failure_class not in RETRYABLE:
            raise ValueError(f"InfraFailed cannot carry {self.failure_class}: use Finished")


class Collected(Struct, frozen=True):
    """Logs and results are home; the outcome is final."""

    outcome: Outcome
    exit_code: int | None
    observation: str = ""


class RetryBudgetSpent(Struct, frozen=True):
    """No attempts are left after an infrastructure failure."""

    failure_class: FailureClass
    retries: int


#: A CancelRequested whose `by` starts with this was the evaluation's own timeout.
TIMEOUT_CANCEL: Final = "timeout:"


class EventRow(Protocol):
    """A recorded transition as the history reads it (the journal's HistoryRow)."""

    @property
    def event(self) -> str: ...
    @property
    def evidence(self) -> Mapping[str, Any]: ...


def timed_out(history: Iterable[EventRow]) -> bool:
    """Whether an invocation's cancel was its timeout's: its outcome is CANCELLED, what it
    tells its caller is TIMEOUT."""
    return any(
        row.event == "CancelRequested"
        and str(row.evidence.get("by", "")).startswith(TIMEOUT_CANCEL)
        for row in history
    )


class CancelRequested(Struct, frozen=True):
    """Someone asked for cancellation; authorizes the cancel effect."""

    by: str


class Cancelled(Struct, frozen=True):
    """Cancellation is settled: nothing of the invocation runs any more."""

    observation: str


class SiteReplaced(Struct, frozen=True):
    """An operator replaced the site configuration the invocation runs with (a moved login
    node): from here on its attempts use the rendering `new_digest`, never a re-read file."""

    old_digest: str
    new_digest: str
    #: the file the new rendering was read from, and the keys whose values changed
    source: str
    changed: str
    by: str


Event = (
    SubmitIntended
    | SubmitDispatched
    | Submitted
    | Rejected
    | Misconfigured
    | ParentFailed
    | FenceIntended
    | ParentAttemptFailed
    | OutcomeUnknown
    | Finished
    | InfraFailed
    | Collected
    | RetryBudgetSpent
    | CancelRequested
    | Cancelled
    | SiteReplaced
)

EVENT_TYPES: tuple[type[Event], ...] = (
    SubmitIntended,
    SubmitDispatched,
    Submitted,
    Rejected,
    Misconfigured,
    ParentFailed,
    FenceIntended,
    ParentAttemptFailed,
    OutcomeUnknown,
    Finished,
    InfraFailed,
    Collected,
    RetryBudgetSpent,
    CancelRequested,
    Cancelled,
    SiteReplaced,
)
