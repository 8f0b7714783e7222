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
    DONE DEPENDENCY_FAILED                       DEPENDENCY_FAILED: what it runs after (`--after`)
                                                 did not succeed; its command never ran
    UNRESOLVED, COLLECTING                       UNRESOLVED (never guessed)
    PREPARED, SUBMITTING, RUNNING, RETRYING      no result yet (NotEnded)

REJECTED, MISCONFIGURED and DEPENDENCY_FAILED are statuses of their own: none blames the
candidate (an APPLICATION_FAILED would) or invites a retry (an infrastructure status would).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from vibesys.job_result.model import (
    EXIT_STATUS,
    MEANING,
    ArtifactProblem,
    JobResult,
    JobStatus,
    NotEnded,
    ResultArtifact,
    ResultTimes,
)
from vibesys.journal_schema import (
    ArtifactRow,
    Attempt,
    ClusterLease,
    HistoryRow,
    Invocation,
    Journal,
    iso,
    open_journal,
)
from vibesys.journal_schema import journal_path as default_journal_path
from vibesys.osutil.layout import attempt_dir, log_paths
from vibesys.states import FailureClass, JobState, Outcome
from vibesys.states.events import TIMEOUT_CANCEL, timed_out

__all__ = [
    "EXIT_STATUS",
    "MEANING",
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
        out, err = log_paths(attempt_dir(inv.invocation_dir, last.attempt))
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


def result_from_journal(
    journal: Journal, invocation_id: str, *, unfinished: JobStatus | None = None
) -> JobResult:
    """The result of one invocation (an id or a unique prefix), from an open Journal; one
    that has not ended raises NotEnded, unless `unfinished` names its status."""
    inv = journal.invocations.resolve(invocation_id)
    bridge = journal.bridge.recorded_evaluation_of(inv.id)
    return job_result(
        inv,
        journal.invocations.attempts(inv.id),
        journal.invocations.history(inv.id),
        journal.progress.artifacts(inv.id),
        journal.clusters.leases_used_by(inv.id),
        results_dir=None
        if bridge is None or bridge.results_dir is None
        else str(Path(bridge.results_dir) / inv.id),
        unfinished=unfinished,
    )


def result(journal_path: str | Path | None, invocation_id: str) -> JobResult:
    """`vibesys result` as a function: the JobResult of `invocation_id` in the journal at
    `journal_path` (None: `$VIBESYS_JOURNAL`, else `.vibesys/journal.db`), read only.
    Raises NotEnded when it has not ended, UsageError for an unknown invocation."""
    journal = open_journal(default_journal_path(journal_path), readonly=True)
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
