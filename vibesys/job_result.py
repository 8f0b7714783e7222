"""JobResult: how one invocation ended, as one typed, versioned record read from the journal.

The journal speaks in states, outcomes and failure classes; a caller (an agent framework, the
evaluation bridge's helper) wants one status it can act on. The mapping is here, once:

    journal                                      JobResult.status
    DONE COMPLETED                               COMPLETED
    DONE APPLICATION_FAILED                      APPLICATION_FAILED (its own time limit too)
    DONE CANCELLED                               CANCELLED; TIMEOUT when the cancel was the
                                                 evaluation's timeout (CancelRequested by
                                                 "timeout: ...")
    DONE TIMEOUT (an outcome to come)            TIMEOUT
    DONE INFRA_FAILED, last failure class F      F: ALLOCATION_EXPIRED, NODE_FAILED, PREEMPTED
                                                 or TRANSPORT_LOST (none recorded: UNRESOLVED)
    DONE REJECTED                                REJECTED: the scheduler refused the request;
                                                 nothing ran
    DONE MISCONFIGURED                           MISCONFIGURED: a person must act (the fix is
                                                 in `reason`); nothing ran
    UNRESOLVED, COLLECTING                       UNRESOLVED (never guessed)
    PREPARED, SUBMITTING, RUNNING, RETRYING      no result yet (NotEnded)

REJECTED and MISCONFIGURED are statuses of their own: neither blames the candidate (an
APPLICATION_FAILED would) nor invites a retry (an infrastructure status would).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from vibesys.errors import UsageError
from vibesys.journal_schema import (
    ArtifactRow,
    Attempt,
    ClusterLease,
    HistoryRow,
    Invocation,
    Journal,
    iso,
)
from vibesys.layout import attempt_dir, log_paths
from vibesys.states import FailureClass, JobState, Outcome

__all__ = [
    "EXIT_STATUS",
    "TIMEOUT_CANCEL",
    "ArtifactProblem",
    "JobResult",
    "JobStatus",
    "NotEnded",
    "ResultArtifact",
    "ResultTimes",
    "exit_status_of",
    "job_result",
    "render_result",
    "result",
    "result_from_journal",
    "status_of",
    "timed_out",
    "with_result",
]

#: A CancelRequested whose `by` starts with this was the evaluation's own timeout.
TIMEOUT_CANCEL: Final = "timeout:"

_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)


class JobStatus(StrEnum):
    COMPLETED = "COMPLETED"  # the command ran to exit 0
    APPLICATION_FAILED = "APPLICATION_FAILED"  # non-zero exit, signal, its own limits: no retry
    ALLOCATION_EXPIRED = "ALLOCATION_EXPIRED"  # infrastructure: the retry budget is spent
    NODE_FAILED = "NODE_FAILED"
    PREEMPTED = "PREEMPTED"
    TRANSPORT_LOST = "TRANSPORT_LOST"
    CANCELLED = "CANCELLED"  # nothing of it runs any more
    UNRESOLVED = "UNRESOLVED"  # the outcome cannot be proven (vibesys reconcile may settle it)
    TIMEOUT = "TIMEOUT"  # the evaluation's timeout ended it
    REJECTED = "REJECTED"  # the scheduler refused the request: nothing ran
    MISCONFIGURED = "MISCONFIGURED"  # configuration or security: a person must act


#: What each status tells the caller to do (docs/bridge.md is generated from it).
MEANING: Final = {
    JobStatus.COMPLETED: "the command ran to exit 0: read its results",
    JobStatus.APPLICATION_FAILED: "the command failed (non-zero exit, a signal, its own time or "
    "memory limit): the candidate's fault, never retried",
    JobStatus.ALLOCATION_EXPIRED: "the allocation ended under it, and the retries are spent",
    JobStatus.NODE_FAILED: "its node failed, and the retries are spent",
    JobStatus.PREEMPTED: "it was preempted, and the retries are spent",
    JobStatus.TRANSPORT_LOST: "the cluster could not be reached to prove its fate, retries spent",
    JobStatus.CANCELLED: "cancelled (the helper interrupted, the session torn down); nothing of it "
    "runs any more",
    JobStatus.UNRESOLVED: "its outcome cannot be proven (`vibesys reconcile` may settle it later)",
    JobStatus.TIMEOUT: "its timeout ended it (cancelled at the deadline)",
    JobStatus.REJECTED: "the scheduler refused the request: nothing ran",
    JobStatus.MISCONFIGURED: "a configuration or security failure: nothing ran; `reason` names "
    "the fix",
}

#: Exit statuses of `vibesys-eval` (and `vibesys run`) for each status but the command's own.
EXIT_STATUS: Final = {
    JobStatus.ALLOCATION_EXPIRED: 75,
    JobStatus.NODE_FAILED: 75,
    JobStatus.PREEMPTED: 75,
    JobStatus.TRANSPORT_LOST: 75,
    JobStatus.CANCELLED: 130,
    JobStatus.UNRESOLVED: 4,
    JobStatus.TIMEOUT: 124,
    JobStatus.REJECTED: 2,
    JobStatus.MISCONFIGURED: 78,
}


class NotEnded(UsageError):
    """The invocation has no result yet: it is still being prepared, submitted, run or retried."""


class ResultArtifact(BaseModel):
    """A declared artifact, brought home and verified."""

    model_config = _STRICT

    path: str = Field(description="Relative to the job's working directory.")
    size: int = Field(ge=0, description="Bytes.")
    sha256: str = Field(description="Hex digest, verified after the download.")
    local_path: str | None = Field(description="The verified copy in the host's run directory.")


class ArtifactProblem(BaseModel):
    """A declared artifact that did not come home."""

    model_config = _STRICT

    path: str = Field(description="The file, or the pattern nothing matched.")
    state: str = Field(description="missing, mismatch or listed (not downloaded yet).")
    detail: str | None = Field(description="What went wrong.")


class ResultTimes(BaseModel):
    """ISO-8601 UTC times; null when not known."""

    model_config = _STRICT

    accepted_at: str = Field(description="When vibesys recorded the invocation.")
    queued_at: str | None = Field(
        description="When the scheduler accepted the last attempt (its queue starts here)."
    )
    started_at: str | None = Field(
        description="When the last attempt's command started, as the job reported it "
        "(SkyPilot's claim, Slurm's start); the local adapter's job starts when queued."
    )
    ended_at: str | None = Field(
        description="When the last attempt ended: the site's end time when it reports one, "
        "else when vibesys saw the end."
    )


class JobResult(BaseModel):
    """How one invocation ended (`vibesys result`, the bridge's `result` reply)."""

    model_config = _STRICT

    schema_version: Literal[1] = Field(default=1, description="Bumped on incompatible change.")
    invocation_id: str
    status: JobStatus
    exit_code: int | None = Field(description="The command's own status (128+N for signal N).")
    reason: str | None = Field(
        description="Why, when the status is not the command's own end (the last event's "
        "evidence, and the fix when a person must act)."
    )
    attempt: int = Field(ge=0, description="The last attempt (0: none was made).")
    remote_job_id: str | None = Field(description="The scheduler's id of the last attempt.")
    cluster_name: str | None = Field(
        description="The SkyPilot cluster it ran on, or the Slurm site's name."
    )
    stdout_path: str | None = Field(description="The last attempt's stdout on this host.")
    stderr_path: str | None = Field(description="The last attempt's stderr on this host.")
    artifacts: Annotated[tuple[ResultArtifact, ...], Field(strict=False)] = ()
    artifact_problems: Annotated[tuple[ArtifactProblem, ...], Field(strict=False)] = ()
    provenance: dict[str, str] = Field(
        default_factory=dict, description="Where and on what the last attempt ran."
    )
    times: ResultTimes
    state: JobState = Field(description="The journal's state.")
    outcome: Outcome | None = Field(description="The journal's outcome (DONE only).")
    failure_class: FailureClass | None = Field(description="How the last attempt ended.")
    results_dir: str | None = Field(
        default=None,
        description="The session's copy (result.json, stdout, stderr, artifacts/) when the "
        "evaluation came through the bridge.",
    )


def status_of(inv: Invocation, history: Sequence[HistoryRow]) -> JobStatus | None:
    """The status of `inv`, or None while it has not ended (see the module's table)."""
    if inv.state in (JobState.UNRESOLVED, JobState.COLLECTING):
        return JobStatus.UNRESOLVED
    if inv.state is not JobState.DONE:
        return None
    outcome = str(inv.outcome)
    if outcome == "TIMEOUT":  # the mapping point of the timeout outcome to come
        return JobStatus.TIMEOUT
    if outcome == Outcome.CANCELLED and timed_out(history):
        return JobStatus.TIMEOUT
    if outcome == Outcome.INFRA_FAILED:
        infra = {
            FailureClass.ALLOCATION_EXPIRED: JobStatus.ALLOCATION_EXPIRED,
            FailureClass.NODE_FAILED: JobStatus.NODE_FAILED,
            FailureClass.PREEMPTED: JobStatus.PREEMPTED,
            FailureClass.TRANSPORT_LOST: JobStatus.TRANSPORT_LOST,
        }
        return infra.get(inv.failure_class, JobStatus.UNRESOLVED)  # type: ignore[arg-type]
    try:
        return JobStatus(outcome)
    except ValueError:
        return JobStatus.UNRESOLVED  # an outcome this code does not know: never guessed


def timed_out(history: Sequence[HistoryRow]) -> bool:
    """Whether the invocation's cancel was its timeout's (`vibesys.engine.deadline`)."""
    return any(
        row.event == "CancelRequested"
        and str(row.evidence.get("by", "")).startswith(TIMEOUT_CANCEL)
        for row in history
    )


def exit_status_of(result: JobResult) -> int:
    """The exit status `vibesys-eval` gives for `result`: the command's own for COMPLETED and
    APPLICATION_FAILED, else the status's (EXIT_STATUS)."""
    if result.status is JobStatus.COMPLETED:
        return 0
    if result.status is JobStatus.APPLICATION_FAILED:
        return result.exit_code if result.exit_code not in (None, 0) else 1
    return EXIT_STATUS[result.status]


def job_result(
    inv: Invocation,
    attempts: Sequence[Attempt],
    history: Sequence[HistoryRow],
    artifacts: Sequence[ArtifactRow] = (),
    leases: Sequence[tuple[int, ClusterLease]] = (),
    *,
    results_dir: str | None = None,
    unfinished: JobStatus | None = None,
) -> JobResult:
    """The result of `inv` from its records (pure). An invocation that has not ended raises
    NotEnded, unless `unfinished` names the status to give it (a session torn down before
    its evaluation settled reports UNRESOLVED)."""
    status = status_of(inv, history) or unfinished
    if status is None:
        raise NotEnded(
            f"invocation {inv.id} has not ended ({inv.state}); `vibesys wait {inv.id}` waits"
        )
    last = attempts[-1] if attempts else None
    provenance = {str(k): str(v) for k, v in (last.provenance if last else {}).items()}
    stdout = stderr = None
    if last is not None:
        out, err = log_paths(attempt_dir(inv.run_dir, last.attempt))
        stdout, stderr = str(out), str(err)
    current = [a for a in artifacts if last is not None and a.attempt == last.attempt]
    good = [a for a in current if a.state in ("verified", "acknowledged") and a.sha256]
    cluster = next((lease.name for n, lease in leases if last and n == last.attempt), None)
    own_end = status in (JobStatus.COMPLETED, JobStatus.APPLICATION_FAILED)
    return JobResult(
        invocation_id=inv.id,
        status=status,
        exit_code=inv.exit_code,
        reason=None if own_end else _reason(history, status),
        attempt=inv.attempt,
        remote_job_id=last.job_id if last else None,
        cluster_name=cluster or provenance.get("site"),
        stdout_path=stdout,
        stderr_path=stderr,
        artifacts=tuple(
            ResultArtifact(
                path=a.path, size=a.size or 0, sha256=str(a.sha256), local_path=a.local_path
            )
            for a in good
        ),
        artifact_problems=tuple(
            ArtifactProblem(path=a.path, state=str(a.state), detail=a.detail)
            for a in current
            if a not in good
        ),
        provenance=provenance,
        times=_times(inv, last, history, provenance),
        state=inv.state,
        outcome=inv.outcome,
        failure_class=inv.failure_class,
        results_dir=results_dir,
    )


def _reason(history: Sequence[HistoryRow], status: JobStatus) -> str | None:
    if not history:
        return None
    asked = [row.evidence.get("by") for row in history if row.event == "CancelRequested"]
    if status in (JobStatus.CANCELLED, JobStatus.TIMEOUT) and asked:
        return f"cancelled by {asked[0]}"
    evidence = history[-1].evidence
    text = " ".join(str(evidence.get("reason") or evidence.get("observation") or "").split())
    fix = evidence.get("fix")
    return (f"{text}; fix: {' '.join(str(fix).split())}" if fix else text) or None


def _times(
    inv: Invocation, last: Attempt | None, history: Sequence[HistoryRow], seen: dict[str, str]
) -> ResultTimes:
    # Handed to the scheduler: the dispatch (a local job may start before its id is recorded).
    handed = (last.dispatched_at or last.submitted_at) if last else None
    queued = None if handed is None else iso(handed)
    started = _utc(seen.get("started_at") or seen.get("start"))
    if started is None and inv.adapter == "local":
        started = queued
    ended = _utc(seen.get("ended_at") or seen.get("end"))
    if ended is None:
        finished = [h.at for h in history if h.event == "Finished"]
        if finished:
            ended = iso(finished[-1])
        elif history and inv.state is JobState.DONE:
            ended = iso(history[-1].at)
    return ResultTimes(
        accepted_at=iso(inv.created_at), queued_at=queued, started_at=started, ended_at=ended
    )


def _utc(text: str | None) -> str | None:
    """An adapter's time as ISO-8601 UTC; one without a zone (Slurm's) is taken to be in this
    host's local time zone, as squeue and sacct print it."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # naive: local time
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def result_from_journal(journal: Journal, invocation_id: str) -> JobResult:
    """The result of one invocation (an id or a unique prefix), from an open Journal."""
    inv = journal.resolve(invocation_id)
    bridge = journal.bridge_request_of(inv.id)
    return job_result(
        inv,
        journal.attempts(inv.id),
        journal.history(inv.id),
        journal.artifacts(inv.id),
        journal.leases_used_by(inv.id),
        results_dir=None
        if bridge is None or bridge.results_dir is None
        else str(Path(bridge.results_dir) / inv.id),
    )


def result(journal_path: str | Path | None, invocation_id: str) -> JobResult:
    """`vibesys result` as a function: the JobResult of `invocation_id` in the journal at
    `journal_path` (None: `$VIBESYS_JOURNAL`, else `.vibesys/journal.db`), read only.
    Raises NotEnded when it has not ended, UsageError for an unknown invocation."""
    from vibesys.journal_schema import journal_path as default_path
    from vibesys.journal_schema import open_journal

    journal = open_journal(default_path(journal_path), readonly=True)
    try:
        return result_from_journal(journal, invocation_id)
    finally:
        journal.close()


def with_result(journal: Journal, inv: Invocation, shown: dict[str, object]) -> dict[str, object]:
    """`run --json` and `wait --json`: the invocation's record with its JobResult under
    "result" (null while it has not ended: a detached run)."""
    try:
        found: object = result_from_journal(journal, inv.id).model_dump(mode="json")
    except NotEnded:
        found = None
    return {**shown, "result": found}


def render_result(found: JobResult) -> str:
    """`vibesys result` without --json: one line per field that has a value."""
    exit_text = "-" if found.exit_code is None else str(found.exit_code)
    lines = [
        f"invocation  {found.invocation_id}",
        f"status      {found.status}  exit {exit_text}  attempt {found.attempt}",
    ]
    optional = (
        ("reason", found.reason),
        ("cluster", found.cluster_name),
        ("job", found.remote_job_id),
        ("stdout", found.stdout_path),
        ("stderr", found.stderr_path),
        ("results", found.results_dir),
    )
    lines += [f"{name:<11} {value}" for name, value in optional if value]
    for art in found.artifacts:
        lines.append(f"artifact    {art.path}  {art.size} bytes  sha256 {art.sha256}")
    for problem in found.artifact_problems:
        lines.append(
            f"artifact    {problem.path}  {problem.state}  {problem.detail or ''}".rstrip()
        )
    times = found.times
    for name, value in (
        ("accepted", times.accepted_at),
        ("queued", times.queued_at),
        ("started", times.started_at),
        ("ended", times.ended_at),
    ):
        if value:
            lines.append(f"{name:<11} {value}")
    return "\n".join(lines)
