"""Read models of the journal's rows, and their JSON form (`journal show --json`)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Protocol

from msgspec import Struct, field, structs

from vibesys.journal_schema.clock import iso, moment, moment_or_none
from vibesys.journal_schema.settings import Settings
from vibesys.states import FailureClass, JobState, Outcome


def job_name(invocation_id: str, attempt: int, prefix: str = "vibesys") -> str:
    """The stable, scheduler-visible name of one attempt: `<prefix>-<invocation>-<attempt>`."""
    return f"{prefix}-{invocation_id}-{attempt}"


class Attempt(Struct, frozen=True):
    attempt: int
    job_name: str
    job_id: str | None
    failure_class: FailureClass | None
    intended_at: datetime
    submitted_at: datetime | None
    dispatched_at: datetime | None = None
    fence_intended_at: datetime | None = None
    #: the claim found in the job's attempt directory, as its key=value text
    claim: str | None = None
    #: where and on what it ran (site, partition, nodes, GPUs, times, ...)
    provenance: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "job_name": self.job_name,
            "job_id": self.job_id,
            "failure_class": self.failure_class,
            "intended_at": iso(self.intended_at),
            "dispatched_at": _iso(self.dispatched_at),
            "submitted_at": _iso(self.submitted_at),
            "fence_intended_at": _iso(self.fence_intended_at),
            "claim": self.claim,
            "provenance": self.provenance,
        }


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else iso(moment)


class HistoryRow(Struct, frozen=True):
    seq: int
    from_state: JobState
    to_state: JobState
    event: str
    at: datetime
    evidence: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "from": self.from_state,
            "to": self.to_state,
            "event": self.event,
            "at": iso(self.at),
            "evidence": self.evidence,
        }


class TypedRequest(Protocol):
    """What the journal reads of an adapter's typed request
    (`vibesys.adapters.requests.AdapterRequest`, which the journal does not import)."""

    @property
    def job_name_prefix(self) -> str: ...


class Invocation(Struct, frozen=True):
    """One invocation's row, with the facts of its current attempt that decisions need."""

    id: str
    label: str | None
    adapter: str
    command: list[str]
    #: the adapter's request as recorded (JSON): what `journal show` and the UI display
    recorded_request: dict[str, Any]
    state: JobState
    version: int
    attempt: int
    max_retries: int
    retries: int
    outcome: Outcome | None
    exit_code: int | None
    failure_class: FailureClass | None
    cancel_requested: bool
    not_before: datetime | None
    invocation_dir: str
    created_at: datetime
    updated_at: datetime
    lease_owner: str | None
    lease_expires_at: datetime | None
    request_version: int = 1
    #: the job's context, recorded at PREPARED: working directory and environment file
    cwd: str | None = None
    env_file: str | None = None
    #: (m007) the digest of the site configuration it runs with (`site_configs`)
    site_digest: str | None = None
    #: the current attempt's facts (None/False before the first intent)
    job_id: str | None = None
    dispatched: bool = False
    fence_intended: bool = False
    intended_at: datetime | None = None
    job_name: str | None = None
    #: how it is carried on, recorded at PREPARED (every process uses these, m006)
    settings: Settings = field(default_factory=Settings)
    #: the adapter's typed request with the site it was recorded with, decoded once when the
    #: row was read by the engine's journal (`InvocationRows`); None where the row is only
    #: shown, which never loads the adapters' models
    request: TypedRequest | None = None

    def evolve(self, changes: dict[str, Any]) -> Invocation:
        """This row with `changes` (field names only)."""
        return structs.replace(self, **changes)

    def attempt_job_name(self, attempt: int) -> str:
        """The stable, scheduler-visible name of `attempt`, the key every lookup uses:
        `<prefix>-<invocation>-<attempt>` (the one recorded at its intent, for the current
        attempt once there is one)."""
        if attempt == self.attempt and self.job_name:
            return self.job_name
        # Without a typed request (the plan table's examples) the prefix is the default one.
        prefix = self.request.job_name_prefix if self.request is not None else "vibesys"
        return job_name(self.id, attempt, prefix)

    @property
    def snapshot_digest(self) -> str | None:
        """The candidate snapshot's digest, as shown (read from the recorded JSON)."""
        candidate = self.recorded_request.get("candidate")
        return str(candidate["digest"]) if isinstance(candidate, dict) else None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Invocation:
        return cls(
            id=row["id"],
            label=row["label"],
            adapter=row["adapter"],
            command=json.loads(row["command"]),
            recorded_request=json.loads(row["request"]),
            state=JobState(row["state"]),
            version=row["version"],
            attempt=row["attempt"],
            max_retries=row["max_retries"],
            retries=row["retries"],
            outcome=Outcome(row["outcome"]) if row["outcome"] else None,
            exit_code=row["exit_code"],
            failure_class=FailureClass(row["failure_class"]) if row["failure_class"] else None,
            cancel_requested=bool(row["cancel_requested"]),
            not_before=moment_or_none(row["not_before"]),
            invocation_dir=row["invocation_dir"],
            created_at=moment(row["created_at"]),
            updated_at=moment(row["updated_at"]),
            lease_owner=row["lease_owner"],
            lease_expires_at=moment_or_none(row["lease_expires_at"]),
            request_version=row["request_version"] or 1,
            cwd=row["cwd"],
            env_file=row["env_file"],
            site_digest=row["site_digest"],
            job_id=row["a_job_id"],
            dispatched=row["a_dispatched_at"] is not None,
            fence_intended=row["a_fence_intended_at"] is not None,
            intended_at=moment_or_none(row["a_intended_at"]),
            job_name=row["a_job_name"],
            settings=Settings.loads(row["settings"]),
        )

    def to_json(self, attempts: list[Attempt], history: list[HistoryRow]) -> dict[str, Any]:
        return {
            "id": self.id,
            "label": self.label,
            "state": self.state,
            "outcome": self.outcome,
            "exit_code": self.exit_code,
            "failure_class": self.failure_class,
            "adapter": self.adapter,
            "command": self.command,
            "request": {"schema_version": self.request_version, **self.recorded_request},
            "cwd": self.cwd,
            "attempt": self.attempt,
            "retries": self.retries,
            "max_retries": self.max_retries,
            "settings": self.settings.to_json(),
            "cancel_requested": self.cancel_requested,
            "invocation_dir": self.invocation_dir,
            "snapshot_digest": self.snapshot_digest,
            "site_digest": self.site_digest,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
            "attempts": [a.to_json() for a in attempts],
            "history": [h.to_json() for h in history],
        }
