"""Read models of the journal's rows, and their JSON form (`journal show --json`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from vibesys.states import FailureClass, JobState, Outcome


@dataclass(frozen=True, slots=True)
class Attempt:
    attempt: int
    job_name: str
    job_id: str | None
    failure_class: FailureClass | None
    intended_at: str
    submitted_at: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "job_name": self.job_name,
            "job_id": self.job_id,
            "failure_class": self.failure_class,
            "intended_at": self.intended_at,
            "submitted_at": self.submitted_at,
        }


@dataclass(frozen=True, slots=True)
class HistoryRow:
    seq: int
    from_state: JobState
    to_state: JobState
    event: str
    at: str
    evidence: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "from": self.from_state,
            "to": self.to_state,
            "event": self.event,
            "at": self.at,
            "evidence": self.evidence,
        }


@dataclass(frozen=True, slots=True)
class Invocation:
    id: str
    label: str | None
    adapter: str
    command: list[str]
    options: dict[str, Any]
    state: JobState
    version: int
    attempt: int
    max_retries: int
    retries: int
    outcome: Outcome | None
    exit_code: int | None
    failure_class: FailureClass | None
    cancel_requested: bool
    not_before: str | None
    run_dir: str
    created_at: str
    updated_at: str
    lease_owner: str | None
    lease_expires_at: str | None
    snapshot_digest: str | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Invocation:
        return cls(
            id=row["id"],
            label=row["label"],
            adapter=row["adapter"],
            command=json.loads(row["command"]),
            options=json.loads(row["options"]),
            state=JobState(row["state"]),
            version=row["version"],
            attempt=row["attempt"],
            max_retries=row["max_retries"],
            retries=row["retries"],
            outcome=Outcome(row["outcome"]) if row["outcome"] else None,
            exit_code=row["exit_code"],
            failure_class=FailureClass(row["failure_class"]) if row["failure_class"] else None,
            cancel_requested=bool(row["cancel_requested"]),
            not_before=row["not_before"],
            run_dir=row["run_dir"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            lease_owner=row["lease_owner"],
            lease_expires_at=row["lease_expires_at"],
            snapshot_digest=row.get("snapshot_digest"),
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
            "options": self.options,
            "attempt": self.attempt,
            "retries": self.retries,
            "max_retries": self.max_retries,
            "cancel_requested": self.cancel_requested,
            "run_dir": self.run_dir,
            "snapshot_digest": self.snapshot_digest,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "attempts": [a.to_json() for a in attempts],
            "history": [h.to_json() for h in history],
        }
