"""JobResult's types: the statuses, what each means and exits with, and the record itself
(strict, frozen, versioned pydantic models). How a journal becomes one is the package's
`__init__`."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from vibesys.errors import UsageError
from vibesys.states import FailureClass, JobState, Outcome
from vibesys.states.exits import (
    EXIT_BAD_INPUT,
    EXIT_DEPENDENCY_FAILED,
    EXIT_INFRA_FAILED,
    EXIT_INTERRUPTED,
    EXIT_MISCONFIGURED,
    EXIT_TIMEOUT,
    EXIT_UNRESOLVED,
)

_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)


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
    DEPENDENCY_FAILED = "DEPENDENCY_FAILED"  # what it runs after did not succeed: it never ran


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
    JobStatus.DEPENDENCY_FAILED: "the invocation it runs after (`--after`) ended without success: "
    "its command never ran",
}

#: Exit statuses of `vibesys-eval` (and `vibesys run`) for each status but the command's own.
EXIT_STATUS: Final = {
    JobStatus.ALLOCATION_EXPIRED: EXIT_INFRA_FAILED,
    JobStatus.NODE_FAILED: EXIT_INFRA_FAILED,
    JobStatus.PREEMPTED: EXIT_INFRA_FAILED,
    JobStatus.TRANSPORT_LOST: EXIT_INFRA_FAILED,
    JobStatus.CANCELLED: EXIT_INTERRUPTED,
    JobStatus.UNRESOLVED: EXIT_UNRESOLVED,
    JobStatus.TIMEOUT: EXIT_TIMEOUT,
    JobStatus.REJECTED: EXIT_BAD_INPUT,
    JobStatus.MISCONFIGURED: EXIT_MISCONFIGURED,
    JobStatus.DEPENDENCY_FAILED: EXIT_DEPENDENCY_FAILED,
}


class NotEnded(UsageError):
    """The invocation has no result yet: it is still being prepared, submitted, run or retried."""


class ResultArtifact(BaseModel):
    """A declared artifact, brought home and verified."""

    model_config = _STRICT

    path: str = Field(description="Relative to the job's working directory.")
    size: int = Field(ge=0, description="Bytes.")
    sha256: str = Field(description="Hex digest, verified after the download.")
    local_path: str | None = Field(description="The verified copy in the local attempt directory.")


class ArtifactProblem(BaseModel):
    """A declared artifact that did not come home."""

    model_config = _STRICT

    path: str = Field(description="The file, or the pattern nothing matched.")
    state: str = Field(
        description="missing, mismatch, refused (over an artifact limit, or beyond where the "
        "bounded walk stopped) or listed (not downloaded yet)."
    )
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
