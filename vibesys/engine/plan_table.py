"""The reconcile decision table, generated from the planner itself: every state (with the facts
that matter) × every class of observation → what `plan()` decides, and what a cancel commits
in every state (`plan_cancel`). docs/architecture.md shows it and a test checks it is fresh;
`vibesys states --format reconcile` prints it. Pure."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from msgspec.structs import replace

from vibesys.engine.plan import (
    Commit,
    Hold,
    PlanContext,
    Redo,
    needs_observation,
    plan,
    plan_cancel,
)
from vibesys.engine.retry import RetryPolicy
from vibesys.engine.seen import Seen, Sight
from vibesys.journal_schema.queue import QueuePlace
from vibesys.journal_schema.records import Invocation
from vibesys.states import FailureClass, JobState, decide

NOW = datetime(2030, 1, 1, tzinfo=UTC)
UNREACHABLE_TIMEOUT = timedelta(minutes=10)

#: (label, observation) for every class of observation, with the variants that decide apart.
SIGHTS: tuple[tuple[str, Seen], ...] = (
    ("starting (launched, not yet claimed)", Seen(Sight.STARTING, "")),
    ("queued, job id known", Seen(Sight.QUEUED, "", "42")),
    ("running, job id known", Seen(Sight.RUNNING, "", "42")),
    ("ended: exit 0", Seen(Sight.ENDED, "", "42", FailureClass.COMPLETED, 0, final=True)),
    (
        "ended: non-zero exit, signal, own limits",
        Seen(Sight.ENDED, "", "42", FailureClass.APPLICATION_FAILED, 3, final=True),
    ),
    ("ended: cancelled", Seen(Sight.ENDED, "", "42", FailureClass.CANCELLED, 143, final=True)),
    (
        "ended: node failure, preemption, lost allocation",
        Seen(Sight.ENDED, "", "42", FailureClass.NODE_FAILED, None, final=True),
    ),
    ("fenced (the claim is a fence)", Seen(Sight.FENCED, "", final=True)),
    ("claimed by the job, end unknown", Seen(Sight.CLAIMED, "", "42", final=True)),
    ("absent (NOT_FOUND, no claim)", Seen(Sight.ABSENT, "")),
    ("unknown (e.g. sacct lag)", Seen(Sight.UNKNOWN, "")),
    ("unreachable, within the unreachable timeout", Seen(Sight.UNREACHABLE, "", since=NOW)),
    (
        "unreachable, unreachable timeout spent",
        Seen(Sight.UNREACHABLE, "", since=NOW - 2 * UNREACHABLE_TIMEOUT),
    ),
    (
        "login refused (a credential to renew), within the unreachable timeout",
        Seen(Sight.UNREACHABLE, "", fix="renew ...", since=NOW),
    ),
    (
        "login refused, unreachable timeout spent",
        Seen(Sight.UNREACHABLE, "", fix="renew ...", since=NOW - 2 * UNREACHABLE_TIMEOUT),
    ),
    ("blocked (config/security error)", Seen(Sight.BLOCKED, "", fix="...", final=True)),
)


@dataclass(frozen=True, slots=True)
class Row:
    situation: str
    observation: str
    decision: str


#: Any moment: no decision of the table depends on when the invocation was made or moved.
_AT = datetime(2026, 1, 1, tzinfo=UTC)


def _invocation(state: JobState, **facts: object) -> Invocation:
    base = Invocation(
        id="example",
        label=None,
        adapter="local",
        command=["true"],
        request={},
        state=state,
        version=3,
        attempt=1,
        max_retries=2,
        retries=0,
        outcome=None,
        exit_code=None,
        failure_class=None,
        cancel_requested=False,
        not_before=None,
        invocation_dir="/runs/example",
        created_at=_AT,
        updated_at=_AT,
        lease_owner=None,
        lease_expires_at=None,
    )
    return replace(base, **facts)


#: A PREPARED invocation with others of its campaign ahead of it in the queue.
WAITING = "PREPARED, others of its campaign ahead"

SITUATIONS: tuple[tuple[str, Invocation], ...] = (
    ("PREPARED", _invocation(JobState.PREPARED, attempt=0)),
    (WAITING, _invocation(JobState.PREPARED, attempt=0)),
    ("SUBMITTING, intent only (nothing sent)", _invocation(JobState.SUBMITTING)),
    ("SUBMITTING, dispatched, no job id", _invocation(JobState.SUBMITTING, dispatched=True)),
    ("RUNNING", _invocation(JobState.RUNNING, dispatched=True, job_id="42")),
    ("UNRESOLVED, no job id", _invocation(JobState.UNRESOLVED, dispatched=True)),
    ("UNRESOLVED, job id known", _invocation(JobState.UNRESOLVED, dispatched=True, job_id="42")),
    (
        "COLLECTING",
        _invocation(JobState.COLLECTING, failure_class=FailureClass.COMPLETED, exit_code=0),
    ),
    (
        "RETRYING, backoff not over",
        _invocation(
            JobState.RETRYING,
            retries=1,
            failure_class=FailureClass.NODE_FAILED,
            not_before=NOW + timedelta(seconds=5),
        ),
    ),
    (
        "RETRYING, budget left",
        _invocation(JobState.RETRYING, retries=1, failure_class=FailureClass.NODE_FAILED),
    ),
    (
        "RETRYING, budget spent",
        _invocation(JobState.RETRYING, retries=3, failure_class=FailureClass.NODE_FAILED),
    ),
)


def rows(*, cancel_requested: bool = False) -> Iterator[Row]:
    plain = PlanContext(NOW, RetryPolicy(), UNREACHABLE_TIMEOUT)
    queued = replace(plain, queue=QueuePlace("campaign-1", ("earlier",)))
    for label, inv in SITUATIONS:
        inv = replace(inv, cancel_requested=cancel_requested)
        ctx = queued if label == WAITING else plain
        if not needs_observation(inv):
            yield Row(label, "(not needed)", describe(inv, plan(inv, None, ctx)))
            continue
        for seen_label, seen in SIGHTS:
            yield Row(label, seen_label, describe(inv, plan(inv, seen, ctx)))


def cancel_rows() -> Iterator[Row]:
    """What a cancel commits in each state (the situations above, a cancel already requested,
    and DONE)."""
    requested = replace(SITUATIONS[4][1], cancel_requested=True)
    done = _invocation(JobState.DONE, failure_class=FailureClass.COMPLETED, exit_code=0)
    situations = (*SITUATIONS, ("RUNNING, a cancel requested already", requested), ("DONE", done))
    for label, inv in situations:
        if label != WAITING:
            yield Row(label, "cancel requested", describe(inv, plan_cancel(inv, "cancel")))


def describe(inv: Invocation, step: Commit | Redo | Hold) -> str:
    match step:
        case Hold():
            return "hold: nothing written"
        case Redo(effect=effect):
            return f"redo {type(effect).__name__}"
        case Commit(event=event):
            decision = decide(inv.state, event)
            effects = ", ".join(type(e).__name__ for e in decision.effects) or "none"
            return f"{type(event).__name__} → {decision.state} (effect: {effects})"
    raise AssertionError(step)


def render_markdown() -> str:
    out: list[str] = []
    for title, cancel in (("", False), ("With a cancel requested", True)):
        if title:
            out += ["", f"**{title}** (only the rows that differ):", ""]
        out += ["| state | observation | decision |", "|---|---|---|"]
        plain = {(r.situation, r.observation): r.decision for r in rows()}
        for row in rows(cancel_requested=cancel):
            if cancel and plain[(row.situation, row.observation)] == row.decision:
                continue
            out.append(f"| {row.situation} | {row.observation} | {row.decision} |")
    out += ["", "**A cancel requested** (`vibesys cancel`, an interrupt, a client gone):", ""]
    out += ["| state | decision |", "|---|---|"]
    out += [f"| {row.situation} | {row.decision} |" for row in cancel_rows()]
    return "\n".join(out) + "\n"
