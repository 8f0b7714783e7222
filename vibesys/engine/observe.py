"""Where the adapters' vocabulary (RemoteState) meets ours (events and failure classes)."""

from __future__ import annotations

from vibesys.adapters.base import RemoteState, RemoteStatus
from vibesys.states import Event, FailureClass, Finished, InfraFailed

_INFRA: dict[RemoteState, FailureClass] = {
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


def terminal_event(status: RemoteStatus, not_before: str) -> Event | None:
    """The event a terminal remote state proves, or None when the job is not terminal."""
    observation = describe(status)
    state = status.state
    if state in _INFRA:
        return InfraFailed(_INFRA[state], observation, not_before)
    if state is RemoteState.COMPLETED and status.exit_code in (0, None):
        return Finished(FailureClass.COMPLETED, 0, observation)
    if state in (RemoteState.COMPLETED, RemoteState.FAILED):
        return Finished(FailureClass.APPLICATION_FAILED, status.exit_code, observation)
    if state in (RemoteState.TIMEOUT, RemoteState.OUT_OF_MEMORY):
        # The job's own limits: the command's fault, never retried.
        return Finished(FailureClass.APPLICATION_FAILED, status.exit_code, observation)
    if state is RemoteState.CANCELLED:
        return Finished(FailureClass.CANCELLED, status.exit_code, observation)
    return None
