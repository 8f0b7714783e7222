"""Where the adapters' vocabulary (RemoteState, BackendError) meets ours (`Seen`)."""

from __future__ import annotations

from datetime import datetime

from vibesys.adapters.base import RemoteState, RemoteStatus
from vibesys.adapters.rundir.claim import Claim
from vibesys.engine.seen import Seen, Sight
from vibesys.errors import BackendError, CredentialRefused
from vibesys.states import FailureClass

#: Terminal remote states that are the infrastructure's failure, never the command's.
INFRA_STATES: dict[RemoteState, FailureClass] = {
    RemoteState.NODE_FAIL: FailureClass.NODE_FAILED,
    RemoteState.BOOT_FAIL: FailureClass.NODE_FAILED,
    RemoteState.LAUNCH_FAILED: FailureClass.NODE_FAILED,
    RemoteState.PREEMPTED: FailureClass.PREEMPTED,
    RemoteState.ALLOCATION_EXPIRED: FailureClass.ALLOCATION_EXPIRED,
}


def describe(status: RemoteStatus) -> str:
    text = f"{status.state}"
    if status.job_id:
        text += f" job {status.job_id}"
    if status.exit_code is not None:
        text += f" exit {status.exit_code}"
    if status.cancelled_by:
        text += f" cancelled by {status.cancelled_by}"
    return f"{text}: {status.observation}" if status.observation else text


def claim_job_id(claim: Claim) -> str:
    """The id a job's claim names: the scheduler's (`*_job_id`), else the process's."""
    for key, value in claim.fields.items():
        if key.endswith("_job_id") and value:
            return value
    return claim.get("pid") or "claimed"


def seen_error(error: BackendError, since: datetime | None = None) -> Seen:
    if isinstance(error, CredentialRefused):
        # A refused login hides the job as an outage does: nothing about it is proven, so it
        # is left alone; the renewal (`fix`) goes with every report of it.
        return Seen(Sight.UNREACHABLE, error.evidence, fix=error.fix, since=since)
    if error.retryable:
        return Seen(Sight.UNREACHABLE, error.evidence, since=since)
    return Seen(Sight.BLOCKED, error.evidence, fix=error.fix, final=True)


def seen_status(status: RemoteStatus) -> Seen:
    """The planner's view of one RemoteStatus."""
    evidence = describe(status)
    claim = status.claim
    if claim is not None and claim.fenced:
        return Seen(Sight.FENCED, evidence, status.job_id, final=True)
    state = status.state
    if state is RemoteState.DEPENDENCY_NEVER_SATISFIED:
        # Not an end of the invocation's: the planner decides from its parent's record.
        return Seen(Sight.UNSATISFIABLE, evidence, status.job_id, reason=status.reason)
    ended = _ended(status)
    if ended is not None:
        failure, code = ended
        unnamed = state is RemoteState.CANCELLED and status.never_started
        unnamed = unnamed and claim is None and not status.cancelled_by
        return Seen(
            Sight.ENDED, evidence, status.job_id, failure, code, final=True, unnamed_cancel=unnamed
        )
    if state in (RemoteState.PENDING, RemoteState.RUNNING):
        if state is RemoteState.RUNNING:
            sight = Sight.RUNNING
        else:
            sight = Sight.QUEUED if status.job_id else Sight.STARTING
        return Seen(
            sight,
            evidence,
            status.job_id,
            reason=status.reason,
            partition=status.partition,
            nodes=status.nodes,
        )
    if claim is not None:
        # The job claimed its attempt, and nothing shows how it ended.
        job_id = status.job_id or claim_job_id(claim)
        return Seen(Sight.CLAIMED, evidence, job_id, final=status.final)
    if state is RemoteState.NOT_FOUND:
        return Seen(Sight.ABSENT, evidence, status.job_id)
    return Seen(Sight.UNKNOWN, evidence, status.job_id, final=status.final)


def _ended(status: RemoteStatus) -> tuple[FailureClass, int | None] | None:
    """How a terminal remote state ended, in failure classes; None when not terminal."""
    state, code = status.state, status.exit_code
    if state in INFRA_STATES:
        return INFRA_STATES[state], None
    if state is RemoteState.COMPLETED and code in (0, None):
        return FailureClass.COMPLETED, 0
    if state in (RemoteState.COMPLETED, RemoteState.FAILED):
        return FailureClass.APPLICATION_FAILED, code
    if state in (RemoteState.TIMEOUT, RemoteState.OUT_OF_MEMORY):
        # The job's own limits: the command's fault, never retried.
        return FailureClass.APPLICATION_FAILED, code
    if state is RemoteState.CANCELLED:
        return FailureClass.CANCELLED, code
    return None
