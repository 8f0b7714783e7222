"""What a status round concludes from squeue's and sacct's rows and the remote attempt
directory, where the rows alone do not say: which row is whose, whether sacct has caught up, and
what a job that neither shows proves. Pure: no commands, no clock."""

from __future__ import annotations

from collections.abc import Sequence

from vibesys.adapters.base import TERMINAL_REMOTE, JobRef, RemoteState, RemoteStatus
from vibesys.adapters.rundir.claim import Claim
from vibesys.adapters.slurm.parse import SACCT_PLACEHOLDER_NAME, SLURM_STATES, SacctRow, SqueueRow

__all__ = [
    "absent_status",
    "claimed_elsewhere",
    "is_terminal",
    "rows_by_name",
    "sacct_lagging",
    "squeue_knows_why",
]


def absent_status(
    job: JobRef,
    claim: Claim | None,
    marker: int | None,
    *,
    sacct_caught_up: bool,
    seen: str | None = None,
) -> RemoteStatus:
    """A job neither squeue nor sacct shows: NOT_FOUND, with the evidence its directory holds.
    `sacct_caught_up`: the attempt is older than the site's sacct lag, so sacct's silence
    about it counts. `seen`: what the scheduler did show instead, when it showed something."""
    if seen is None:
        seen = (
            f"job {job.job_id} known to neither squeue nor sacct"
            if job.job_id
            else f"no job named {job.job_name} in squeue (all states) or sacct"
        )
    parts = [seen]
    if claim is not None:
        parts.append(claim.describe())
    if marker is not None:
        parts.append(f"marker exit_code={marker}")
    if claim is not None and claim.kind == "job" and marker is not None:
        # The job claimed, ran and left its marker: that is its outcome, whatever the
        # scheduler still remembers.
        state = RemoteState.COMPLETED if marker == 0 else RemoteState.FAILED
        job_id = claim.get("slurm_job_id") or job.job_id
        return RemoteStatus(
            job.job_name, job_id, state, exit_code=marker, observation="; ".join(parts)
        )
    # A claim without a marker the scheduler has forgotten: the job ended without leaving
    # its status (killed), and nothing will ever tell how. Unless sacct may not have caught up
    # yet (the attempt is younger than its lag): then sacct may still tell.
    final = claim is not None and claim.kind == "job" and sacct_caught_up
    return RemoteStatus(
        job.job_name,
        job.job_id,
        RemoteState.NOT_FOUND,
        observation="; ".join(parts),
        claim=claim,
        final=final,
    )


def rows_by_name(rows: Sequence[SqueueRow], jobs: Sequence[JobRef]) -> dict[str, SqueueRow]:
    """squeue's row for each job's name. A job whose id is known gets only the row with that
    id: another job of the same name (a manual resubmission, say) is not this attempt's. One
    whose id is not known yet (a lookup after a crash) gets the earliest submitted: a copy
    submitted by hand comes after the one vibesys submitted (and whichever claims the attempt
    first is its job: `claimed_elsewhere`)."""
    ids = {job.job_name: str(job.job_id) for job in jobs if job.job_id}
    found: dict[str, SqueueRow] = {}
    for row in rows:
        recorded = ids.get(row.job_name)
        if recorded is not None:
            if row.job_id == recorded:
                found[row.job_name] = row
        elif (held := found.get(row.job_name)) is None or _earlier(row, held):
            found[row.job_name] = row
    return found


def claimed_elsewhere(claim: Claim | None, job_id: str) -> str | None:
    """The id of the job that claimed the attempt, if another than `job_id`: the attempt's
    job is that one (a copy of its batch script that started first, say); `job_id` found
    the attempt claimed and ran nothing."""
    if claim is None or claim.kind != "job":
        return None
    claimer = claim.get("slurm_job_id")
    return claimer if claimer and claimer != job_id else None


def _earlier(row: SqueueRow, than: SqueueRow) -> bool:
    return _submission_order(row) < _submission_order(than)


def _submission_order(row: SqueueRow) -> tuple[int, str]:
    number = row.job_id.partition("_")[0].partition("+")[0]
    return (int(number) if number.isdigit() else 0, row.job_id)


def sacct_lagging(row: SacctRow) -> bool:
    """sacct has not yet written the job's real record (its name reads `allocation`)."""
    return row.job_name == SACCT_PLACEHOLDER_NAME


def squeue_knows_why(live: SqueueRow, record: SacctRow) -> bool:
    """A job Slurm killed for its dependency: squeue says so at once (CANCELLED,
    DependencyNeverSatisfied), sacct a moment later (seen under load: `CANCELLED|...|None`,
    no uid). Until then sacct's row cannot tell it from another cancel."""
    unexplained = record.cancelled_by is None and record.reason in (None, "None")
    killed = live.state == "CANCELLED" and live.reason == "DependencyNeverSatisfied"
    return record.state == "CANCELLED" and unexplained and killed


def is_terminal(row: SqueueRow | SacctRow | None) -> bool:
    return row is not None and SLURM_STATES.get(row.state, RemoteState.UNKNOWN) in TERMINAL_REMOTE
