"""`decide()`, the pure core, read from the table the `transitions` machine is built from.

`decide(state, event)` answers: may this event happen here, which state follows, and which
effects must the engine carry out once the transition is committed. It does no I/O and reads
no clock.

The machine is the definition; a commit must not pay for firing it. The table says, for each
(state, trigger), where it lands and which callbacks run (its `after`; the table has no
conditions, so the pair alone decides them): `decide()` runs exactly those on the event, or
returns the decision itself when none of them reads the event. `decide_by_machine`
(`states/transitions_machine.py`) fires the machine; the tests hold the two equal for every
row. Neither reading the journal nor committing loads `transitions`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Protocol

from msgspec import Struct, field

from vibesys.errors import InvalidTransition
from vibesys.states.effects import (
    Cancel,
    Collect,
    Effect,
    Fence,
    Finish,
    Poll,
    Resolve,
    ScheduleRetry,
    Submit,
)
from vibesys.states.events import (
    Cancelled,
    Collected,
    Event,
    FenceIntended,
    InfraFailed,
    Misconfigured,
    ParentFailed,
    Rejected,
    RetryBudgetSpent,
    SubmitDispatched,
)
from vibesys.states.job_state import JobState, Outcome
from vibesys.states.table import TRANSITIONS, dest_of, sources_of
from vibesys.states.validate import validate_table


class _Call(Protocol):
    """What a callback reads of the machine's EventData: the event, passed as a keyword."""

    @property
    def kwargs(self) -> dict[str, Any]: ...


class _Replayed(Struct, frozen=True):
    """The stand-in for EventData when `decide()` runs a row's callbacks itself."""

    kwargs: dict[str, Any]


class Decision(Struct, frozen=True):
    state: JobState
    effects: tuple[Effect, ...]


class EffectsModel(Struct):
    """What the machine moves; callbacks only append effects, the engine performs them."""

    state: JobState
    effects: list[Effect] = field(default_factory=list)

    def emit_submit(self, data: _Call) -> None:
        ev: SubmitDispatched = data.kwargs["event"]
        self.effects.append(Submit(ev.attempt, ev.job_name))

    def emit_fence(self, data: _Call) -> None:
        ev: FenceIntended = data.kwargs["event"]
        self.effects.append(Fence(ev.attempt))

    def emit_poll(self, data: _Call) -> None:
        self.effects.append(Poll())

    def emit_resolve(self, data: _Call) -> None:
        self.effects.append(Resolve())

    def emit_collect(self, data: _Call) -> None:
        self.effects.append(Collect())

    def emit_retry(self, data: _Call) -> None:
        ev: InfraFailed = data.kwargs["event"]
        self.effects.append(ScheduleRetry(ev.not_before))

    def emit_cancel(self, data: _Call) -> None:
        self.effects.append(Cancel())

    def emit_finish(self, data: _Call) -> None:
        outcome, code = final_outcome(data.kwargs["event"])
        self.effects.append(Finish(outcome, code))


def final_outcome(event: Event) -> tuple[Outcome, int | None]:
    """The outcome and exit code recorded with a transition into DONE."""
    match event:
        case Collected(outcome=outcome, exit_code=code):
            return outcome, code
        case Rejected():
            return Outcome.REJECTED, None
        case Misconfigured():
            return Outcome.MISCONFIGURED, None
        case ParentFailed():
            return Outcome.DEPENDENCY_FAILED, None
        case RetryBudgetSpent():
            return Outcome.INFRA_FAILED, None
        case Cancelled():
            return Outcome.CANCELLED, None
    raise InvalidTransition("DONE", type(event).__name__)


def _next_states() -> dict[tuple[JobState, str], JobState | None]:
    return {
        (source, row["trigger"]): dest_of(row) for row in TRANSITIONS for source in sources_of(row)
    }


#: (state, trigger) -> next state, None for an internal transition. A fast path for the
#: journal's compare-and-swap; `decide()` is checked against it in the tests.
NEXT: Final = _next_states()


def next_state(state: JobState, event: Event) -> JobState:
    """The state after `event`, or InvalidTransition. Cheap: a dict lookup."""
    trigger = type(event).__name__
    key = (state, trigger)
    if key not in NEXT:
        raise InvalidTransition(state, trigger)
    dest = NEXT[key]
    return state if dest is None else dest


#: Callbacks whose effect does not read the event. A decision made of these alone is the same
#: for every event of its (state, trigger), so it is kept whole; any other callback is run.
_EVENT_FREE: Final = frozenset({"emit_poll", "emit_resolve", "emit_collect", "emit_cancel"})


def _callbacks(row: Mapping[str, Any]) -> tuple[str, ...]:
    after = row.get("after")
    if after is None:
        return ()
    return (after,) if isinstance(after, str) else tuple(after)


def _planned() -> dict[tuple[JobState, str], tuple[JobState, tuple[str, ...]]]:
    return {
        (source, row["trigger"]): (dest_of(row) or source, _callbacks(row))
        for row in TRANSITIONS
        for source in sources_of(row)
    }


def _whole(
    planned: dict[tuple[JobState, str], tuple[JobState, tuple[str, ...]]],
) -> dict[tuple[JobState, str], Decision]:
    whole = {}
    for (state, trigger), (dest, callbacks) in planned.items():
        if _EVENT_FREE.issuperset(callbacks):
            model = EffectsModel(state)
            for name in callbacks:
                getattr(model, name)(_Replayed({}))
            whole[(state, trigger)] = Decision(dest, tuple(model.effects))
    return whole


class _Read(Struct, frozen=True):
    """The table as `decide()` reads it."""

    #: (state, trigger) -> (next state, the callbacks the table names): what the machine does
    planned: dict[tuple[JobState, str], tuple[JobState, tuple[str, ...]]]
    #: the decisions no callback of which reads the event (decisions are immutable)
    whole: dict[tuple[JobState, str], Decision]


#: Read (and validated) on the first decision, not at import: reading the journal decides
#: nothing. Two threads reading it at once read the same thing; the assignment is whole.
_READ: _Read | None = None


def _read() -> _Read:
    global _READ
    if _READ is None:
        validate_table(TRANSITIONS)  # `decide()` reads the table without building the machine
        planned = _planned()
        _READ = _Read(planned, _whole(planned))
    return _READ


def decide(state: JobState, event: Event) -> Decision:
    """Apply `event` in `state`: next state and the effects it authorizes (see the module
    docstring: the table's row for the pair, its callbacks run on the event)."""
    key = (state, type(event).__name__)
    table = _READ or _read()
    whole = table.whole.get(key)
    if whole is not None:
        return whole
    planned = table.planned.get(key)
    if planned is None:
        raise InvalidTransition(state, key[1])
    dest, callbacks = planned
    model = EffectsModel(state)
    data = _Replayed({"event": event})
    for name in callbacks:
        getattr(model, name)(data)
    return Decision(dest, tuple(model.effects))
