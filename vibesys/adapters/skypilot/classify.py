"""Pure classification of one SkyPilot attempt from everything observed about it.

SkyPilot reports only 0/100..103 and a job status; the wrapper's files in the remote attempt
directory say what the command itself did. The marker wins whenever it exists: a command that
wrote its exit code ran to its end, whatever happened to the allocation afterwards. Except death
by a signal (N≥128) when the attempt's allocation has ended: Slurm signals the steps of an
allocation it ends (scancel, wall time, preemption, node failure), and the wrapper records that
signal as it dies.

| marker / files       | SkyPilot says               | cluster      | RemoteState             |
|----------------------|-----------------------------|--------------|-------------------------|
| exit_code 0          | anything                    | anything     | COMPLETED               |
| exit_code N≥128      | CANCELLED, or we cancelled  | anything     | CANCELLED               |
| exit_code N≥128      | anything                    | gone, or up  | LOST (below)            |
|                      |                             | on a new one |                         |
| exit_code N≥128      | anything                    | unknown      | UNKNOWN                 |
| exit_code N>0        | anything                    | up (its own) | FAILED                  |
| refused/setup_failed | anything                    | anything     | LAUNCH_FAILED           |
| none                 | INIT/PENDING/SETTING_UP     | up           | PENDING                 |
| none                 | RUNNING                     | up           | RUNNING                 |
| none                 | SUCCEEDED                   | up           | UNKNOWN, final          |
| none, claim          | FAILED/FAILED_SETUP/_DRIVER | up           | NODE_FAIL               |
| none, no claim       | FAILED/FAILED_SETUP/_DRIVER | up           | LAUNCH_FAILED           |
| none                 | CANCELLED                   | up           | CANCELLED               |
| none, claim          | not listed                  | gone         | LOST (below)            |
| none, claim or id    | not listed                  | up, new one  | LOST (below)            |
| none, submitted (id) | not listed                  | gone         | LOST (below)            |
| none, no claim/id    | not listed, no exec request | up or gone   | NOT_FOUND               |
|                      | in flight                   |              |                         |
| anything else        |                             |              | UNKNOWN                 |

LOST: the allocation the attempt ran in (its claim's) or was submitted to (its recorded id) has
ended. SkyPilot only says the cluster is gone; how the allocation ended is Slurm's record of
that job (`Observed.allocation_end`, its sacct State, asked by `allocation_end.py`):

| Slurm's record of the allocation                          | RemoteState        |
|-----------------------------------------------------------|--------------------|
| PREEMPTED                                                 | PREEMPTED          |
| NODE_FAIL                                                 | NODE_FAIL          |
| TIMEOUT (its wall time), CANCELLED (scancel), COMPLETED   | ALLOCATION_EXPIRED |
| (sky down), anything else, none (not asked, no answer)    |                    |

ALLOCATION_EXPIRED stays the name of a loss whose cause cannot be known; all three are retried
within the same policy, on a new allocation.

Every status carries the remote attempt directory's claim (a fence there: the attempt is retired).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import Enum
from typing import Final

from msgspec import Struct

from vibesys.adapters.base import RemoteState, RemoteStatus
from vibesys.adapters.rundir.claim import Claim
from vibesys.adapters.rundir.markers import DirState
from vibesys.adapters.skypilot.parse import QueueJob, SkyJobStatus

__all__ = [
    "ClusterView",
    "Observed",
    "classify",
    "format_job_id",
    "lost_allocation",
    "parse_job_ref_id",
    "pick",
]

#: How a lost allocation's end is named, by Slurm's State of it. Any other state, or none, is
#: ALLOCATION_EXPIRED: the wall time, a scancel, a `sky down`, or a cause nobody can tell.
_LOST_AS: Final = {
    "PREEMPTED": RemoteState.PREEMPTED,
    "NODE_FAIL": RemoteState.NODE_FAIL,
}


class ClusterView(Enum):
    UP = "up"  # the queue answered
    GONE = "gone"  # a refresh proved the allocation ended (SkyPilot dropped the cluster)
    UNKNOWN = "unknown"


class Observed(Struct, frozen=True):
    job_name: str
    #: the job id vibesys recorded at submission ("<sky id>@<allocation>"), if any
    recorded_id: str | None
    queued: QueueJob | None
    cluster: ClusterView
    #: the Slurm job id of the allocation holding the cluster now
    allocation: str | None
    files: DirState
    cancelled_by_us: bool
    #: an exec or launch request is still active in the API server
    submissions_in_flight: bool
    #: Slurm's State of the lost allocation (`lost_allocation`) once asked; None: not asked,
    #: or Slurm did not say
    allocation_end: str | None = None


def format_job_id(sky_job_id: int, allocation: str | None) -> str:
    """SkyPilot job ids restart at 1 on every new allocation: the id alone is ambiguous."""
    return f"{sky_job_id}@{allocation or '?'}"


def parse_job_ref_id(job_id: str | None) -> tuple[int | None, str | None]:
    if not job_id:
        return None, None
    number, _, allocation = job_id.partition("@")
    return (int(number) if number.isdigit() else None), (
        allocation if allocation and allocation != "?" else None
    )


def pick(
    jobs: Sequence[QueueJob], name: str, claimed: int | None, recorded: int | None
) -> QueueJob | None:
    """This attempt's entry among the queue's jobs of that name: the one that holds the claim,
    else the one recorded at submission, else the newest."""
    named = [job for job in jobs if job.job_name == name]
    for wanted in (claimed, recorded):
        for job in named:
            if wanted is not None and job.job_id == wanted:
                return job
    return named[0] if named else None


def lost_allocation(seen: Observed) -> str | None:
    """The allocation whose end a LOST classification rests on: the one the attempt's claim
    names, else the one it was submitted to."""
    return _claimed_allocation(seen.files.claim) or parse_job_ref_id(seen.recorded_id)[1]


def classify(seen: Observed) -> RemoteStatus:
    files, queued = seen.files, seen.queued
    claim = files.claim
    claim_allocation = _claimed_allocation(claim)
    allocation = claim_allocation or seen.allocation
    job_id = (
        format_job_id(queued.job_id, seen.allocation) if queued is not None else seen.recorded_id
    )
    evidence = f"{files.describe()}; sky: {queued.status if queued else 'not listed'}"
    evidence += f"; cluster {seen.cluster.value}" + (
        f" on allocation {allocation}" if allocation else ""
    )

    def status(
        state: RemoteState, code: int | None = None, by: str | None = None, final: bool = False
    ) -> RemoteStatus:
        return RemoteStatus(
            seen.job_name, job_id, state, code, by, evidence, claim=claim, final=final
        )

    def lost() -> RemoteStatus:
        ended = lost_allocation(seen)
        record = f"Slurm's record of allocation {ended}: {seen.allocation_end or 'none'}"
        state = _LOST_AS.get(seen.allocation_end or "", RemoteState.ALLOCATION_EXPIRED)
        found = f"{evidence}; {record}" if ended else evidence
        return RemoteStatus(seen.job_name, job_id, state, observation=found, claim=claim)

    by_us = "vibesys" if seen.cancelled_by_us else None
    started_elsewhere = (
        claim_allocation is not None
        and seen.allocation is not None
        and claim_allocation != seen.allocation
    )
    if files.exit_code is not None:
        code = files.exit_code
        sky_cancelled = queued is not None and queued.status is SkyJobStatus.CANCELLED
        if code >= 128 and (sky_cancelled or seen.cancelled_by_us):
            return status(RemoteState.CANCELLED, code, by_us)
        if code >= 128 and (seen.cluster is ClusterView.GONE or started_elsewhere):
            return lost()  # killed with its allocation
        if code >= 128 and seen.cluster is ClusterView.UNKNOWN:
            return status(RemoteState.UNKNOWN)  # the next round shows whether it still holds
        return status(RemoteState.COMPLETED if code == 0 else RemoteState.FAILED, code)
    if files.refused is not None or files.setup_failed is not None:
        return status(RemoteState.LAUNCH_FAILED)
    if queued is not None and seen.cluster is not ClusterView.GONE:
        return _from_queue(queued.status, _is_job(claim), status, by_us)
    _, recorded_allocation = parse_job_ref_id(seen.recorded_id)
    submitted_elsewhere = (  # an allocation not seen (an empty squeue) proves nothing
        recorded_allocation is not None
        and seen.allocation is not None
        and recorded_allocation != seen.allocation
    )
    if seen.cluster is ClusterView.GONE and (claim_allocation or recorded_allocation):
        return lost()
    if seen.cluster is ClusterView.UP and (started_elsewhere or submitted_elsewhere):
        return lost()
    proven_absent = (
        seen.cluster is not ClusterView.UNKNOWN
        and claim is None
        and seen.recorded_id is None
        and not seen.submissions_in_flight
    )
    return status(RemoteState.NOT_FOUND if proven_absent else RemoteState.UNKNOWN)


def _is_job(claim: Claim | None) -> bool:
    return claim is not None and claim.kind == "job"


def _claimed_allocation(claim: Claim | None) -> str | None:
    return (claim.get("slurm_job_id") or None) if claim is not None and _is_job(claim) else None


def _from_queue(
    sky: SkyJobStatus, claimed: bool, status: Callable[..., RemoteStatus], by_us: str | None
) -> RemoteStatus:
    if not sky.terminal:
        return status(RemoteState.RUNNING if sky is SkyJobStatus.RUNNING else RemoteState.PENDING)
    if sky is SkyJobStatus.CANCELLED:
        return status(RemoteState.CANCELLED, None, by_us)
    if sky is SkyJobStatus.SUCCEEDED:
        # The wrapper writes its marker before it exits 0: success without one proves nothing,
        # and the job is over, so waiting will not tell more.
        return status(RemoteState.UNKNOWN, final=True)
    # FAILED, FAILED_SETUP, FAILED_DRIVER without a marker: the command never ended on its own.
    # With a claim it started and was killed with its step (node failure, allocation end);
    # without one it never started.
    return status(RemoteState.NODE_FAIL if claimed else RemoteState.LAUNCH_FAILED)
