"""What a transition writes besides the state: the invocation row's other columns and the
attempts table. Called inside `Journal.commit_transition`'s transaction."""

from __future__ import annotations

import sqlite3
from typing import Any

from vibesys.journal_schema.records import Invocation
from vibesys.states import (
    CancelRequested,
    Collected,
    Decision,
    Event,
    FenceIntended,
    Finish,
    Finished,
    InfraFailed,
    SubmitDispatched,
    SubmitIntended,
    Submitted,
)


def row_updates(current: Invocation, event: Event, decision: Decision) -> dict[str, Any]:
    """The columns of the invocation row an event changes besides state and version."""
    columns: dict[str, Any] = {}
    match event:
        case SubmitIntended(attempt=attempt):
            columns.update(attempt=attempt, not_before=None)
        case Finished(failure_class=fc, exit_code=code):
            columns.update(failure_class=fc, exit_code=code)
        case InfraFailed(failure_class=fc, not_before=not_before):
            columns.update(
                failure_class=fc, retries=current.retries + 1, not_before=not_before or None
            )
        case CancelRequested():
            columns.update(cancel_requested=True)
        case Collected(exit_code=code):
            columns.update(exit_code=code)
    for effect in decision.effects:
        if isinstance(effect, Finish):
            columns.update(outcome=effect.outcome)
    return columns


def attempt_facts(current: Invocation, event: Event, at: str) -> dict[str, Any]:
    """How the current attempt's facts on the read model change (mirrors `attempt_updates`)."""
    match event:
        case SubmitIntended(job_name=name):
            return {
                "job_id": None,
                "job_name": name,
                "dispatched": False,
                "fence_intended": False,
                "intended_at": at,
            }
        case SubmitDispatched():
            return {"dispatched": True}
        case FenceIntended():
            return {"fence_intended": True}
        case Submitted(job_id=job_id):
            return {"job_id": job_id}
    return {}


def attempt_updates(conn: sqlite3.Connection, current: Invocation, event: Event, at: str) -> None:
    key = (current.id, current.attempt)
    match event:
        case SubmitIntended(attempt=attempt, job_name=name):
            conn.execute(
                "INSERT INTO attempts (invocation_id, attempt, job_name, intended_at) "
                "VALUES (?,?,?,?)",
                (current.id, attempt, name, at),
            )
        case SubmitDispatched():
            conn.execute(
                "UPDATE attempts SET dispatched_at=? WHERE invocation_id=? AND attempt=?",
                (at, *key),
            )
        case FenceIntended():
            conn.execute(
                "UPDATE attempts SET fence_intended_at=coalesce(fence_intended_at, ?) "
                "WHERE invocation_id=? AND attempt=?",
                (at, *key),
            )
        case Submitted(job_id=job_id):
            conn.execute(
                "UPDATE attempts SET job_id=?, submitted_at=? WHERE invocation_id=? AND attempt=?",
                (job_id, at, *key),
            )
        case Finished(failure_class=fc) | InfraFailed(failure_class=fc):
            conn.execute(
                "UPDATE attempts SET failure_class=? WHERE invocation_id=? AND attempt=?",
                (fc, *key),
            )
