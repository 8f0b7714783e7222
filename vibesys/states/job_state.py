"""The states of an invocation, its final outcomes and the failure classes.

Values are stored verbatim in the journal: never rename a member, deprecate it instead.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class JobState(StrEnum):
    PREPARED = "PREPARED"  # recorded, nothing has been sent anywhere
    SUBMITTING = "SUBMITTING"  # intent to submit committed under a stable job name
    RUNNING = "RUNNING"  # the scheduler accepted and identified the job
    COLLECTING = "COLLECTING"  # the job reached a terminal state; logs and results come home
    DONE = "DONE"  # final; carries an Outcome
    RETRYING = "RETRYING"  # an infrastructure failure; the next attempt is scheduled
    UNRESOLVED = "UNRESOLVED"  # the outcome cannot be proven; never guessed


INITIAL: Final = JobState.PREPARED
TERMINAL: Final = frozenset({JobState.DONE})
ACTIVE: Final = frozenset(JobState) - TERMINAL


class Outcome(StrEnum):
    """What a DONE invocation ended as."""

    COMPLETED = "COMPLETED"  # exit 0
    APPLICATION_FAILED = "APPLICATION_FAILED"  # non-zero exit, signal death, its own time limit
    CANCELLED = "CANCELLED"
    INFRA_FAILED = "INFRA_FAILED"  # the retry budget is spent; keeps the last failure class
    REJECTED = "REJECTED"  # the request was invalid
    MISCONFIGURED = "MISCONFIGURED"  # a configuration or security failure a person must fix
    #: the invocation it runs after (`--after`) ended without success: its command never ran
    DEPENDENCY_FAILED = "DEPENDENCY_FAILED"


class FailureClass(StrEnum):
    """How one attempt ended, in our words rather than a scheduler's."""

    COMPLETED = "COMPLETED"
    APPLICATION_FAILED = "APPLICATION_FAILED"
    ALLOCATION_EXPIRED = "ALLOCATION_EXPIRED"
    NODE_FAILED = "NODE_FAILED"
    PREEMPTED = "PREEMPTED"
    TRANSPORT_LOST = "TRANSPORT_LOST"
    CANCELLED = "CANCELLED"
    #: the job waited on a job of its parent invocation that ended without success; it was
    #: cancelled before its command could run (an attempt that ends so is not retried, it waits
    #: for the parent's next attempt; the invocation ends so once the parent has failed)
    DEPENDENCY_FAILED = "DEPENDENCY_FAILED"


#: Classes that say the infrastructure, not the command, failed. TRANSPORT_LOST is only
#: retried once the job is proven gone; the engine enforces that before it reports one.
RETRYABLE: Final = frozenset(
    {
        FailureClass.ALLOCATION_EXPIRED,
        FailureClass.NODE_FAILED,
        FailureClass.PREEMPTED,
        FailureClass.TRANSPORT_LOST,
    }
)

#: The outcome a finished attempt of each non-retryable class leads to.
OUTCOME_OF: Final = {
    FailureClass.COMPLETED: Outcome.COMPLETED,
    FailureClass.APPLICATION_FAILED: Outcome.APPLICATION_FAILED,
    FailureClass.CANCELLED: Outcome.CANCELLED,
    FailureClass.DEPENDENCY_FAILED: Outcome.DEPENDENCY_FAILED,
}
