"""The `transitions` machine built from the table: the definition `decide()` is held equal to
(`decide_by_machine`, for every row, in the tests). Only the checks load it."""

from __future__ import annotations

import threading
from typing import Final

from transitions import Machine, MachineError

from vibesys.errors import InvalidTransition
from vibesys.states.events import Event
from vibesys.states.job_state import INITIAL, JobState
from vibesys.states.machine import NEXT, Decision, EffectsModel
from vibesys.states.table import TRANSITIONS
from vibesys.states.validate import validate_table

__all__ = ["build_machine", "decide_by_machine"]


#: One machine per thread. A queued machine keeps one transition queue for every caller, so a
#: trigger fired from a second thread would be appended behind the first and return at once,
#: unapplied; a machine of its own per thread needs no lock.
_LOCAL: Final = threading.local()


def build_machine() -> Machine:
    """Validate the table and build this thread's machine (once per thread)."""
    machine: Machine | None = getattr(_LOCAL, "machine", None)
    if machine is None:
        machine = _new_machine()
        _LOCAL.machine = machine
    return machine


def _new_machine() -> Machine:
    validate_table(TRANSITIONS)
    return Machine(
        model=None,
        states=list(JobState),
        transitions=TRANSITIONS,
        initial=INITIAL,
        auto_transitions=False,
        queued=True,
        send_event=True,
        model_override=True,
    )


def _fire(model: EffectsModel, event: Event) -> None:
    trigger = type(event).__name__
    try:
        build_machine().events[trigger].trigger(model, event=event)
    except MachineError as exc:
        raise InvalidTransition(model.state, trigger) from exc


def decide_by_machine(state: JobState, event: Event) -> Decision:
    """Fire `event` in `state` through the machine itself (what `decide()` must equal)."""
    trigger = type(event).__name__
    if (state, trigger) not in NEXT:
        raise InvalidTransition(state, trigger)
    # The model is never added to the machine: the event is fired on it directly, so no
    # trigger methods are bound and a decision costs no more than the callbacks it runs.
    model = EffectsModel(state)
    _fire(model, event)
    return Decision(JobState(model.state), tuple(model.effects))
