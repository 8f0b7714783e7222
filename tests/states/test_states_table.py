"""The transition table: graph validation, the edges the issue requires, the built machine."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from tests.states.state_strategies import EXPECTED
from vibesys.states import ACTIVE, EVENT_TYPES, INITIAL, TERMINAL, JobState
from vibesys.states import JobState as S
from vibesys.states import transitions_machine as machine_module
from vibesys.states.table import NON_TERMINAL, TRANSITIONS, dest_of, sources_of
from vibesys.states.transitions_machine import build_machine
from vibesys.states.validate import TableError, edges, validate_table

Row = dict[str, Any]


def table() -> list[Row]:
    """A private, mutable copy of the real table."""
    return [dict(row) for row in copy.deepcopy(TRANSITIONS)]


def drop(rows: list[Row], trigger: str, source: JobState | None = None) -> list[Row]:
    """`rows` without `trigger` (only from `source`, when given)."""
    result = []
    for row in rows:
        if row["trigger"] != trigger:
            result.append(row)
            continue
        if source is None:
            continue
        kept = [s for s in sources_of(row) if s != source]
        if kept:
            result.append({**row, "source": kept})
    return result


def test_the_real_table_is_valid() -> None:
    before = copy.deepcopy(TRANSITIONS)
    validate_table(TRANSITIONS)
    assert before == TRANSITIONS, "validation must not modify the table"


def test_states_are_exactly_those_of_the_issue() -> None:
    assert {s.value for s in JobState} == {
        "PREPARED",
        "SUBMITTING",
        "RUNNING",
        "COLLECTING",
        "DONE",
        "RETRYING",
        "UNRESOLVED",
    }
    assert INITIAL is S.PREPARED
    assert {S.DONE} == TERMINAL
    assert frozenset(JobState) - TERMINAL == ACTIVE == set(NON_TERMINAL)


def test_every_trigger_names_an_event_type() -> None:
    assert {row["trigger"] for row in TRANSITIONS} == {cls.__name__ for cls in EVENT_TYPES}


def test_rejects_two_initial_states() -> None:
    # OutcomeUnknown is the only way into UNRESOLVED: without it UNRESOLVED is a second root.
    broken = drop(table(), "OutcomeUnknown")
    with pytest.raises(TableError, match=r"one initial state.*PREPARED.*UNRESOLVED"):
        validate_table(broken)


def test_rejects_an_edge_out_of_done() -> None:
    broken = [*table(), {"trigger": "Reopen", "source": S.DONE, "dest": S.RUNNING}]
    with pytest.raises(TableError, match="terminal state DONE has an outgoing edge"):
        validate_table(broken)


def test_rejects_an_internal_event_in_done() -> None:
    broken = [*table(), {"trigger": "Poke", "source": [S.DONE], "dest": None}]
    with pytest.raises(TableError, match="terminal state accepts internal event Poke"):
        validate_table(broken)


def test_rejects_a_trap_state() -> None:
    # Take every way out of COLLECTING; its internal CancelRequested must not count as one.
    broken = drop(drop(table(), "Collected"), "Cancelled", S.COLLECTING)
    assert any(S.COLLECTING in sources_of(r) and dest_of(r) is None for r in broken)
    with pytest.raises(TableError, match="COLLECTING is a trap"):
        validate_table(broken)


def test_rejects_a_state_that_cannot_reach_done() -> None:
    # RUNNING and COLLECTING only lead to each other; every state has a way in and a way out.
    cycle: list[Row] = [
        {"trigger": "Go", "source": S.PREPARED, "dest": S.SUBMITTING},
        {"trigger": "Stop", "source": S.PREPARED, "dest": S.DONE},
        {"trigger": "Run", "source": S.SUBMITTING, "dest": S.RUNNING},
        {"trigger": "Retry", "source": S.SUBMITTING, "dest": S.RETRYING},
        {"trigger": "Lost", "source": S.SUBMITTING, "dest": S.UNRESOLVED},
        {"trigger": "Stop", "source": [S.RETRYING, S.UNRESOLVED], "dest": S.DONE},
        {"trigger": "Collect", "source": S.RUNNING, "dest": S.COLLECTING},
        {"trigger": "Again", "source": S.COLLECTING, "dest": S.RUNNING},
    ]
    with pytest.raises(TableError, match="RUNNING cannot reach a terminal state"):
        validate_table(cycle)
    # The same table with one way out of the cycle is fine: the check is reachability.
    validate_table([*cycle, {"trigger": "Stop", "source": S.COLLECTING, "dest": S.DONE}])


def test_rejects_a_duplicate_trigger() -> None:
    broken = [*table(), {"trigger": "Submitted", "source": S.SUBMITTING, "dest": S.COLLECTING}]
    with pytest.raises(TableError, match="defined twice"):
        validate_table(broken)


def test_rejects_a_duplicate_within_one_row() -> None:
    broken = [*table(), {"trigger": "Poke", "source": [S.RUNNING, S.RUNNING], "dest": S.DONE}]
    with pytest.raises(TableError, match="defined twice"):
        validate_table(broken)


@pytest.fixture
def broken_machine_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # Each thread builds its machine once: forget this thread's, break the table, rebuild.
    monkeypatch.delattr(machine_module._LOCAL, "machine", raising=False)
    broken = drop(drop(table(), "Collected"), "Cancelled", S.COLLECTING)
    monkeypatch.setattr(machine_module, "TRANSITIONS", broken)
    yield
    machine_module._LOCAL.__dict__.pop("machine", None)


@pytest.mark.usefixtures("broken_machine_table")
def test_the_machine_is_validated_when_built() -> None:
    with pytest.raises(TableError, match="COLLECTING"):
        build_machine()


def test_the_machine_is_built_from_the_table_without_auto_transitions() -> None:
    machine = build_machine()
    assert machine.auto_transitions is False
    assert machine.has_queue is True
    assert set(machine.states) == {s.value for s in JobState}
    assert set(machine.events) == {cls.__name__ for cls in EVENT_TYPES}
    for trigger, event in machine.events.items():
        built = {(src, t.dest) for src, ts in event.transitions.items() for t in ts}
        rows = [r for r in TRANSITIONS if r["trigger"] == trigger]
        expected = {
            (str(src), None if r["dest"] is None else str(r["dest"]))
            for r in rows
            for src in sources_of(r)
        }
        assert built == expected, trigger


# The edges the issue names, each with the event that takes it.
REQUIRED = [
    (S.PREPARED, "SubmitIntended", S.SUBMITTING),
    (S.SUBMITTING, "Submitted", S.RUNNING),
    (S.SUBMITTING, "InfraFailed", S.RETRYING),
    (S.SUBMITTING, "OutcomeUnknown", S.UNRESOLVED),
    (S.RUNNING, "Finished", S.COLLECTING),
    (S.RUNNING, "InfraFailed", S.RETRYING),
    (S.RUNNING, "OutcomeUnknown", S.UNRESOLVED),
    (S.COLLECTING, "Collected", S.DONE),
    (S.RETRYING, "SubmitIntended", S.SUBMITTING),
    (S.RETRYING, "RetryBudgetSpent", S.DONE),
    (S.RETRYING, "Cancelled", S.DONE),
    (S.UNRESOLVED, "Submitted", S.RUNNING),
    (S.UNRESOLVED, "Finished", S.COLLECTING),
    (S.UNRESOLVED, "InfraFailed", S.RETRYING),
    (S.UNRESOLVED, "Cancelled", S.DONE),
]


@pytest.mark.parametrize(("source", "trigger", "dest"), REQUIRED)
def test_required_edge_is_in_the_table(source: JobState, trigger: str, dest: JobState) -> None:
    assert EXPECTED.get((source, trigger)) == dest
    assert (source, dest) in edges(TRANSITIONS)


@pytest.mark.parametrize("state", NON_TERMINAL)
def test_every_non_terminal_state_has_a_cancel_path(state: JobState) -> None:
    assert EXPECTED[(state, "Cancelled")] is S.DONE
    # Where something may be running, the intent to cancel is recorded first, in place.
    if state in {S.SUBMITTING, S.RUNNING, S.COLLECTING, S.UNRESOLVED}:
        assert EXPECTED[(state, "CancelRequested")] is state


def test_done_has_no_row_at_all() -> None:
    assert not [key for key in EXPECTED if key[0] in TERMINAL]


def test_an_application_failure_has_no_edge_to_retrying() -> None:
    # Only InfraFailed and ParentAttemptFailed (an attempt that never ran, its parent's job
    # having failed) lead to RETRYING; Finished (the job's own end) never does.
    into_retrying = {
        trigger
        for (source, trigger), dest in EXPECTED.items()
        if dest is S.RETRYING and source is not S.RETRYING
    }
    assert into_retrying == {"InfraFailed", "ParentAttemptFailed"}
