"""What a transition writes besides the state: the invocation row's other columns, the
attempts table, and the same facts on the read model that `commit_transition` returns. One
match per event kind keeps the table and the read model in step (and runs on every commit)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from vibesys.journal_schema.clock import moment
from vibesys.journal_schema.records import Invocation
from vibesys.states import (
    CancelRequested,
    Collected,
    Decision,
    Event,
    FailureClass,
    FenceIntended,
    Finish,
    Finished,
    InfraFailed,
    ParentAttemptFailed,
    SiteReplaced,
    SubmitDispatched,
    SubmitIntended,
    Submitted,
)

_THIS_ATTEMPT = "WHERE invocation_id=? AND attempt=?"
_INTEND = "INSERT INTO attempts (invocation_id, attempt, job_name, intended_at) VALUES (?,?,?,?)"
_DISPATCHED = f"UPDATE attempts SET dispatched_at=? {_THIS_ATTEMPT}"
_FENCE = f"UPDATE attempts SET fence_intended_at=coalesce(fence_intended_at, ?) {_THIS_ATTEMPT}"
_SUBMITTED = f"UPDATE attempts SET job_id=?, submitted_at=? {_THIS_ATTEMPT}"
_FAILURE = f"UPDATE attempts SET failure_class=? {_THIS_ATTEMPT}"

#: What a transition writes besides the state, as a plain tuple (a NamedTuple costs several
#: times as much to make, on every commit):
#: - the invocation's columns besides state, version and updated_at;
#: - the attempts table's statement (None: the attempt is unchanged) and its parameters;
#: - the read model's other fields: the current attempt's, and datetimes for the columns' text.
Changes = tuple[dict[str, Any], str | None, tuple[Any, ...], dict[str, Any]]


def changes(
    current: Invocation, event: Event, decision: Decision, at: str, when: datetime
) -> Changes:
    """What committing `event` at `at` (`when`, as text) writes and makes of the read model."""
    key = (current.id, current.attempt)
    columns: dict[str, Any] = {}
    sql: str | None = None
    params: tuple[Any, ...] = ()
    facts: dict[str, Any] = {}
    match event:
        case SubmitIntended(attempt=attempt, job_name=name):
            columns = {"attempt": attempt, "not_before": None}
            sql, params = _INTEND, (current.id, attempt, name, at)
            facts = {
                "job_id": None,
                "job_name": name,
                "dispatched": False,
                "fence_intended": False,
                "intended_at": when,
            }
        case SubmitDispatched():
            sql, params, facts = _DISPATCHED, (at, *key), {"dispatched": True}
        case FenceIntended():
            sql, params, facts = _FENCE, (at, *key), {"fence_intended": True}
        case Submitted(job_id=job_id):
            sql, params, facts = _SUBMITTED, (job_id, at, *key), {"job_id": job_id}
        case Finished(failure_class=fc, exit_code=code):
            columns = {"failure_class": fc, "exit_code": code}
            sql, params = _FAILURE, (fc, *key)
        case InfraFailed(failure_class=fc, not_before=not_before):
            retries = current.retries + 1
            columns = {"failure_class": fc, "retries": retries, "not_before": not_before or None}
            sql, params = _FAILURE, (fc, *key)
            facts = {"not_before": moment(not_before) if not_before else None}
        case ParentAttemptFailed():
            # Not a retry: the budget is untouched, and no backoff (the parent's job decides).
            fc = FailureClass.DEPENDENCY_FAILED
            columns = {"failure_class": fc, "not_before": None}
            sql, params = _FAILURE, (fc, *key)
            facts = {"not_before": None}
        case CancelRequested():
            columns = {"cancel_requested": True}
        case Collected(exit_code=code):
            columns = {"exit_code": code}
        case SiteReplaced(new_digest=digest):
            columns = {"site_digest": digest}
    for effect in decision.effects:
        if isinstance(effect, Finish):
            columns["outcome"] = effect.outcome
    return columns, sql, params, facts
