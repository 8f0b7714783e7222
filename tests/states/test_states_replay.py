"""`replay()`: the public helper that feeds a recorded history through the state machine."""

from __future__ import annotations

import pytest

from vibesys.states import (
    Collected,
    FailureClass,
    Finished,
    Outcome,
    ReplayMismatch,
    Step,
    SubmitIntended,
    Submitted,
    replay,
)
from vibesys.states import JobState as S

GOOD = [
    Step(1, S.PREPARED, S.SUBMITTING, SubmitIntended(1, "vibesys-inv-1")),
    Step(2, S.SUBMITTING, S.RUNNING, Submitted("101")),
    Step(3, S.RUNNING, S.COLLECTING, Finished(FailureClass.COMPLETED, 0)),
    Step(4, S.COLLECTING, S.DONE, Collected(Outcome.COMPLETED, 0)),
]


def test_a_good_history_replays_to_its_end() -> None:
    assert replay(GOOD) is S.DONE
    for n in range(len(GOOD) + 1):
        assert replay(GOOD[:n]) is ([S.PREPARED] + [s.to_state for s in GOOD])[n]


def test_an_empty_history_is_the_initial_state() -> None:
    assert replay([]) is S.PREPARED


def test_replay_can_start_elsewhere() -> None:
    # Sequence numbers always count from 1, wherever the replay starts.
    with pytest.raises(ReplayMismatch) as mismatch:
        replay(GOOD[2:], start=S.RUNNING)
    assert mismatch.value.seq == 3
    renumbered = [Step(i + 1, s.from_state, s.to_state, s.event) for i, s in enumerate(GOOD[2:])]
    assert replay(renumbered, start=S.RUNNING) is S.DONE


def _mismatch(steps: list[Step]) -> ReplayMismatch:
    with pytest.raises(ReplayMismatch) as caught:
        replay(steps)
    assert isinstance(caught.value, ValueError)
    assert str(caught.value).startswith(f"seq {caught.value.seq}: ")
    return caught.value


def test_a_wrong_from_state_names_its_seq() -> None:
    steps = [*GOOD[:2], Step(3, S.UNRESOLVED, S.COLLECTING, GOOD[2].event), GOOD[3]]
    mismatch = _mismatch(steps)
    assert mismatch.seq == 3
    assert "recorded from UNRESOLVED, replay is in RUNNING" in str(mismatch)


def test_a_wrong_to_state_names_its_seq() -> None:
    steps = [GOOD[0], Step(2, S.SUBMITTING, S.COLLECTING, GOOD[1].event), *GOOD[2:]]
    mismatch = _mismatch(steps)
    assert mismatch.seq == 2
    assert "recorded COLLECTING, the table says RUNNING" in str(mismatch)


@pytest.mark.parametrize(
    ("seqs", "bad_seq", "expected"),
    [
        ([1, 2, 4, 5], 4, 3),  # a gap
        ([1, 2, 2, 3], 2, 3),  # a repeat
        ([0, 1, 2, 3], 0, 1),  # numbering from zero
        ([2, 3, 4, 5], 2, 1),  # the first row is missing
    ],
)
def test_a_broken_sequence_names_the_first_bad_seq(
    seqs: list[int], bad_seq: int, expected: int
) -> None:
    steps = [Step(n, s.from_state, s.to_state, s.event) for n, s in zip(seqs, GOOD, strict=True)]
    mismatch = _mismatch(steps)
    assert mismatch.seq == bad_seq
    assert f"expected sequence number {expected}" in str(mismatch)


def test_an_event_the_table_refuses_names_its_seq() -> None:
    # Collected in RUNNING: the history skipped COLLECTING, from and to look plausible.
    steps = [*GOOD[:2], Step(3, S.RUNNING, S.DONE, Collected(Outcome.COMPLETED, 0))]
    mismatch = _mismatch(steps)
    assert mismatch.seq == 3
    assert "event Collected is not allowed in state RUNNING" in str(mismatch)


def test_nothing_moves_out_of_done() -> None:
    steps = [*GOOD, Step(5, S.DONE, S.SUBMITTING, SubmitIntended(2, "vibesys-inv-2"))]
    mismatch = _mismatch(steps)
    assert mismatch.seq == 5
    assert "not allowed in state DONE" in str(mismatch)


def test_the_first_of_several_bad_rows_is_named() -> None:
    steps = [
        GOOD[0],
        Step(2, S.SUBMITTING, S.DONE, GOOD[1].event),  # bad
        Step(3, S.PREPARED, S.DONE, GOOD[2].event),  # also bad
    ]
    assert _mismatch(steps).seq == 2
