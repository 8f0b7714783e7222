"""Property tests: random events, DONE absorbs, the journal codec, replay of random paths."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st
from msgspec import structs

from tests.states.state_strategies import EXPECTED, events, valid_paths
from vibesys.errors import InvalidTransition
from vibesys.journal_schema import decode_event, encode_event
from vibesys.states import (
    INITIAL,
    TERMINAL,
    Event,
    JobState,
    ReplayMismatch,
    Step,
    decide,
    next_state,
    replay,
)


@given(st.lists(events, max_size=40))
def test_random_events_from_prepared_never_leave_jobstate(sequence: list[Event]) -> None:
    state = INITIAL
    for event in sequence:
        trigger = type(event).__name__
        try:
            decision = decide(state, event)
        except InvalidTransition:
            assert (state, trigger) not in EXPECTED
            continue
        assert (state, trigger) in EXPECTED
        assert isinstance(decision.state, JobState)
        assert decision.state is EXPECTED[(state, trigger)] is next_state(state, event)
        if state in TERMINAL:  # pragma: no cover - a failure would land here
            raise AssertionError(f"{state} accepted {trigger}")
        state = decision.state
    assert state in set(JobState)


@given(events)
def test_done_absorbs_every_event(event: Event) -> None:
    for terminal in TERMINAL:
        try:
            decision = decide(terminal, event)
        except InvalidTransition as refused:
            assert refused.state == terminal
        else:  # pragma: no cover - a failure would land here
            raise AssertionError(f"{terminal} moved to {decision.state} on {event}")


@given(events)
def test_every_event_survives_the_journal_codec(event: Event) -> None:
    kind, evidence = encode_event(event)
    assert kind == type(event).__name__
    assert json.loads(evidence) == json.loads(json.dumps(structs.asdict(event)))
    decoded = decode_event(kind, evidence)
    assert type(decoded) is type(event)
    assert decoded == event
    # Enum members come back as members, not bare strings, and encode the same again.
    for name in event.__struct_fields__:
        assert type(getattr(decoded, name)) is type(getattr(event, name))
    assert encode_event(decoded) == (kind, evidence)


@given(valid_paths())
def test_replay_of_a_valid_path_returns_its_end(path: tuple[list[Step], JobState]) -> None:
    steps, end = path
    assert replay(steps) is end
    assert replay(iter(steps)) is end  # any iterable, consumed once


@given(valid_paths(), st.data())
def test_replay_names_the_seq_of_a_corrupted_step(
    path: tuple[list[Step], JobState], data: st.DataObject
) -> None:
    steps, _ = path
    if not steps:
        return
    index = data.draw(st.integers(0, len(steps) - 1), label="index")
    step = steps[index]
    wrong = data.draw(st.sampled_from([s for s in JobState if s != step.to_state]), label="to")
    corrupted = [*steps[:index], structs.replace(step, to_state=wrong), *steps[index + 1 :]]
    try:
        replay(corrupted)
    except ReplayMismatch as mismatch:
        assert mismatch.seq == step.seq == index + 1
        assert str(mismatch).startswith(f"seq {step.seq}: ")
    else:  # pragma: no cover - a failure would land here
        raise AssertionError("a corrupted history replayed cleanly")
