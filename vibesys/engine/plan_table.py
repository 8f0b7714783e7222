"""The reconcile decision table, generated from the planner itself: every state (with the facts
that matter) × every class of observation → what `plan()` decides, and what a cancel commits
in every state (`plan_cancel`). docs/architecture.md shows it and a test checks it is fresh;
`vibesys states --format reconcile` prints it. Pure."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from msgspec import Struct
from msgspec.structs import replace

from vibesys.engine.observation import RetryPolicy, plan_context
from vibesys.engine.plan import (
    CarryOn,
    Commit,
    Hold,
    PlanContext,
    Redo,
    Step,
    needs_observation,
    plan,
    plan_cancel,
)
from vibesys.engine.seen import Seen, Sight
from vibesys.journal_schema.queue import QueuePlace
from vibesys.journal_schema.records import Invocation
from vibesys.states import FailureClass, JobState, Outcome, decide

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
    (
        "killed before its start: its dependency never satisfied",
        Seen(Sight.UNSATISFIABLE, "", "42"),
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


class Row(Struct, frozen=True):
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
        recorded_request={},
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
#: Chained (`--after`): the parent's job its attempt waited on, 41, failed, and the journal
#: does not know it yet, or the parent's new attempt has no job yet (RETRYING), or job 43; or
#: the parent failed for good.
PARENT_UNAWARE = "a child, its parent still recorded running that job"
PARENT_BETWEEN = "a child, its parent between attempts"
PARENT_RETRIED = "a child, its parent's new attempt running"
PARENT_FAILED = "a child, its parent failed for good"

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
_CHILD_RUNNING = _invocation(JobState.RUNNING, dispatched=True, job_id="42")
_CHILD_WAITING = _invocation(JobState.RETRYING, failure_class=FailureClass.DEPENDENCY_FAILED)
#: (label, child, parent's state, its job): the chained situations, each with its parent.
CHAINED: tuple[tuple[str, Invocation, JobState, str | None], ...] = (
    (
        f"PREPARED, {PARENT_BETWEEN}",
        _invocation(JobState.PREPARED, attempt=0),
        JobState.RETRYING,
        "41",
    ),
    (f"RUNNING, {PARENT_UNAWARE}", _CHILD_RUNNING, JobState.RUNNING, "41"),
    (f"RUNNING, {PARENT_BETWEEN}", _CHILD_RUNNING, JobState.RETRYING, "41"),
    (f"RUNNING, {PARENT_RETRIED}", _CHILD_RUNNING, JobState.RUNNING, "43"),
    (f"RUNNING, {PARENT_FAILED}", _CHILD_RUNNING, JobState.DONE, "41"),
    (
        f"RETRYING (its dependency failed), {PARENT_UNAWARE}",
        _CHILD_WAITING,
        JobState.RUNNING,
        "41",
    ),
    (
        f"RETRYING (its dependency failed), {PARENT_BETWEEN}",
        _CHILD_WAITING,
        JobState.RETRYING,
        "41",
    ),
    (f"RETRYING (its dependency failed), {PARENT_RETRIED}", _CHILD_WAITING, JobState.RUNNING, "43"),
    (f"RETRYING (its dependency failed), {PARENT_FAILED}", _CHILD_WAITING, JobState.DONE, "41"),
)
#: The observations that decide a chained child apart.
CHAINED_SIGHTS = (
    "queued, job id known",
    "killed before its start: its dependency never satisfied",
    "fenced (the claim is a fence)",
)


def _parent(state: JobState, job_id: str | None) -> Invocation:
    failed = Outcome.APPLICATION_FAILED if state is JobState.DONE else None
    return _invocation(state, job_id=job_id, outcome=failed, attempt=2 if job_id == "43" else 1)


def rows(*, cancel_requested: bool = False) -> Iterator[Row]:
    plain = PlanContext(NOW, RetryPolicy(), UNREACHABLE_TIMEOUT)
    queued = replace(plain, queue=QueuePlace("campaign-1", ("earlier",)))
    situations = [(label, inv, queued if label == WAITING else plain) for label, inv in SITUATIONS]
    for label, inv, parent_state, job in CHAINED:
        waited = None if inv.attempt < 1 else "41"
        parent = _parent(parent_state, job)
        situations.append(
            (
                label,
                inv,
                plan_context(NOW, RetryPolicy(), UNREACHABLE_TIMEOUT, parent, None, waited),
            )
        )
    sights = dict(SIGHTS)
    for label, inv, ctx in situations:
        inv = replace(inv, cancel_requested=cancel_requested)
        if not needs_observation(inv):
            yield Row(label, "(not needed)", describe(inv, plan(inv, None, ctx)))
            continue
        chained = ctx.parent is not None
        for seen_label in CHAINED_SIGHTS if chained else sights:
            yield Row(label, seen_label, describe(inv, plan(inv, sights[seen_label], ctx)))


def cancel_rows() -> Iterator[Row]:
    """What a cancel commits in each state (the situations above, a cancel already requested,
    and DONE)."""
    requested = replace(SITUATIONS[4][1], cancel_requested=True)
    done = _invocation(JobState.DONE, failure_class=FailureClass.COMPLETED, exit_code=0)
    situations = (*SITUATIONS, ("RUNNING, a cancel requested already", requested), ("DONE", done))
    for label, inv in situations:
        if label != WAITING:
            yield Row(label, "cancel requested", describe(inv, plan_cancel(inv, "cancel")))


def describe(inv: Invocation, step: Step) -> str:
    match step:
        case Hold():
            return "hold: nothing written"
        case CarryOn(invocation_id=other):
            return f"carry {other} on first"
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
