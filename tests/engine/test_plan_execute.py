"""The engine carries out what the planner decides, and only that: for every row of the
reconcile table (every situation × every class of observation, with and without a cancel),
one step commits the planner's event and executes exactly the effects `decide()` returns for
it (or redoes exactly the effect the planner names, or writes and does nothing on a hold)."""

from __future__ import annotations

from collections.abc import Generator
from datetime import timedelta

import pytest
from msgspec.structs import replace

from vibesys.adapters.fake import FakeBackend
from vibesys.engine import Engine, RetryPolicy
from vibesys.engine import core as core_module
from vibesys.engine.observation import observed_context
from vibesys.engine.plan import Commit, Hold, Redo, plan
from vibesys.engine.plan_table import NOW, SIGHTS, SITUATIONS, UNREACHABLE_TIMEOUT, WAITING
from vibesys.engine.seen import Fact, Progressed
from vibesys.journal_schema import Invocation, Journal, iso
from vibesys.states import (
    CancelRequested,
    Effect,
    Event,
    FailureClass,
    Finished,
    InfraFailed,
    JobState,
    OutcomeUnknown,
    SubmitDispatched,
    SubmitIntended,
    Submitted,
    decide,
)

LATER = iso(NOW + timedelta(seconds=5))
EARLIER = iso(NOW - timedelta(seconds=5))


def path_to(label: str, name: str, cancel: bool) -> list[Event]:
    """Events that bring a new invocation into the situation `label` of the table."""
    intent, dispatch = SubmitIntended(1, name), SubmitDispatched(1, name)
    failed = [Submitted("42"), InfraFailed(FailureClass.NODE_FAILED, "NODE_FAIL", EARLIER)]
    ask = [CancelRequested("test")] if cancel else []
    paths: dict[str, list[Event]] = {
        "PREPARED": [],
        WAITING: [],
        "SUBMITTING, intent only (nothing sent)": [intent, *ask],
        "SUBMITTING, dispatched, no job id": [intent, dispatch, *ask],
        "RUNNING": [intent, dispatch, Submitted("42"), *ask],
        "UNRESOLVED, no job id": [intent, dispatch, OutcomeUnknown("lost"), *ask],
        "UNRESOLVED, job id known": [
            intent,
            dispatch,
            Submitted("42"),
            OutcomeUnknown("lost"),
            *ask,
        ],
        "COLLECTING": [
            intent,
            dispatch,
            Submitted("42"),
            Finished(FailureClass.COMPLETED, 0),
            *ask,
        ],
        "RETRYING, backoff not over": [
            intent,
            dispatch,
            Submitted("42"),
            *ask,
            InfraFailed(FailureClass.NODE_FAILED, "NODE_FAIL", LATER),
        ],
        "RETRYING, budget left": [intent, dispatch, *ask, *failed],
        "RETRYING, budget spent": [
            intent,
            dispatch,
            *ask,
            *failed,
            SubmitIntended(2, name[:-1] + "2"),
            SubmitDispatched(2, name[:-1] + "2"),
            *failed,
            SubmitIntended(3, name[:-1] + "3"),
            SubmitDispatched(3, name[:-1] + "3"),
            *failed,
        ],
    }
    return paths[label]


def situated(journal: Journal, engine: Engine, label: str, cancel: bool) -> Invocation:
    runs = journal.path.parent / "runs"
    campaign = "campaign-1" if label == WAITING else None
    if campaign is not None:  # one ahead of it in its campaign's queue
        engine.prepare(adapter="fake", command=["x"], run_root=runs, campaign=campaign)
    inv = engine.prepare(adapter="fake", command=["x"], run_root=runs, campaign=campaign)
    for event in path_to(label, f"vibesys-{inv.id}-1", cancel):
        inv, _ = journal.commit_transition(inv, event)
    return inv


#: A cancel of a PREPARED invocation settles at once (nothing runs): it is never "requested".
CASES = [
    (label, seen_label, cancel)
    for label, _ in SITUATIONS
    for seen_label, _ in SIGHTS
    for cancel in (False, True)
    if not (cancel and label in ("PREPARED", WAITING))
]


@pytest.mark.parametrize(("label", "seen_label", "cancel"), CASES)
def test_one_step_executes_exactly_the_decided_effects(
    journal: Journal, monkeypatch: pytest.MonkeyPatch, label: str, seen_label: str, cancel: bool
) -> None:
    engine = Engine(
        journal,
        lambda name, request: FakeBackend(),
        retry=RetryPolicy(max_retries=2),
        unreachable_timeout=UNREACHABLE_TIMEOUT,
        clock=lambda: NOW,
    )
    template = dict(SITUATIONS)[label]
    inv = situated(journal, engine, label, cancel)
    assert (inv.state, inv.cancel_requested) == (template.state, cancel)
    seen = dict(SIGHTS)[seen_label]
    executed: list[Effect] = []

    def record(
        _engine: Engine, _inv: Invocation, effect: Effect
    ) -> Generator[Progressed, None, Fact | None]:
        executed.append(effect)
        yield from ()  # a generator, as `execute` is: it yields nothing here
        return None

    monkeypatch.setattr(core_module, "execute", record)
    place = journal.queue.queue_place(inv.id) if inv.state is JobState.PREPARED else None
    decided = plan(replace(inv), seen, observed_context(engine, inv, None, place))
    before = journal.invocations.history(inv.id)
    after = engine.step(inv, seen)
    written = journal.invocations.history(inv.id)[len(before) :]
    match decided:
        case Hold():
            assert (written, executed, after) == ([], [], inv)
        case Redo(effect=effect):
            assert (written, executed) == ([], [effect])
        case Commit(event=event):
            assert [h.event for h in written] == [type(event).__name__]
            assert executed == list(decide(inv.state, event).effects)
            assert after.state is decide(inv.state, event).state
    if inv.state is not JobState.DONE:
        assert journal.invocations.get(inv.id).state is after.state
