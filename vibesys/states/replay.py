"""Replay a recorded history through the state machine (for `journal verify` and golden tests)."""

from __future__ import annotations

from collections.abc import Iterable

from msgspec import Struct

from vibesys.errors import InvalidTransition
from vibesys.states.events import Event
from vibesys.states.job_state import INITIAL, JobState
from vibesys.states.machine import Decision, decide


class Step(Struct, frozen=True):
    """One recorded transition: what the history says happened."""

    seq: int
    from_state: JobState
    to_state: JobState
    event: Event


class ReplayMismatch(ValueError):
    """The recorded history disagrees with the transition table."""

    def __init__(self, seq: int, message: str) -> None:
        super().__init__(f"seq {seq}: {message}")
        self.seq = seq


def replay(steps: Iterable[Step], start: JobState = INITIAL) -> JobState:
    """Feed every recorded event through `decide()`; return the final state.

    Raises ReplayMismatch at the first step whose recorded source or destination differs from
    what the table says, or whose sequence number is not the next one.
    """
    state = start
    expected_seq = 1
    for step in steps:
        if step.seq != expected_seq:
            raise ReplayMismatch(step.seq, f"expected sequence number {expected_seq}")
        if step.from_state != state:
            raise ReplayMismatch(step.seq, f"recorded from {step.from_state}, replay is in {state}")
        try:
            decision: Decision = decide(state, step.event)
        except InvalidTransition as exc:
            raise ReplayMismatch(step.seq, str(exc)) from exc
        if decision.state != step.to_state:
            raise ReplayMismatch(
                step.seq, f"recorded {step.to_state}, the table says {decision.state}"
            )
        state = decision.state
        expected_seq += 1
    return state
