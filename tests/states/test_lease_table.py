"""The cluster lease's transition table: validated like the job's, what each trigger allows,
the diagram drawn from it, and the journal's writes held to it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from vibesys.errors import StaleState
from vibesys.journal_schema import open_journal
from vibesys.states.diagram import lease_mermaid
from vibesys.states.lease_table import (
    LEASE_INITIAL,
    LEASE_TERMINAL,
    LEASE_TRANSITIONS,
    LIVE_LEASE_STATES,
    LeaseChoice,
    LeaseState,
    decide_lease,
    lease_next,
    lease_sources,
)
from vibesys.states.validate import TableError, validate_table

L = LeaseState


def _validate(rows: list[dict[str, Any]]) -> None:
    validate_table(rows, LeaseState, LEASE_INITIAL, LEASE_TERMINAL)


def test_the_lease_table_is_a_well_formed_machine() -> None:
    _validate(LEASE_TRANSITIONS)
    assert set(LIVE_LEASE_STATES).isdisjoint(LEASE_TERMINAL)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda rows: rows.append({"trigger": "X", "source": [L.FAILED], "dest": L.UP}), "failed"),
        (lambda rows: rows.append({"trigger": "X", "source": [L.LOST], "dest": None}), "internal"),
        (lambda rows: rows.pop(), "initial state launching, found.*released"),  # unreachable
        (lambda rows: rows.append({"trigger": "Lost", "source": [L.UP], "dest": L.LOST}), "twice"),
        (lambda rows: rows[0].update(conditions="busy"), "conditions"),
    ],
)
def test_a_broken_lease_table_is_refused(change: Any, problem: str) -> None:
    rows = copy.deepcopy(LEASE_TRANSITIONS)
    change(rows)
    with pytest.raises(TableError, match=problem):
        _validate(rows)


def test_each_trigger_moves_a_lease_only_from_its_sources() -> None:
    assert lease_next(L.LAUNCHING, "Launched") is L.UP
    assert lease_next(L.LAUNCHING, "LaunchIntended") is L.LAUNCHING  # continued
    assert lease_next(L.UP, "Used") is L.UP
    assert lease_next(L.RELEASING, "Used") is None  # never onto a cluster on its way down
    assert lease_next(L.RELEASING, "Released") is L.RELEASED
    assert lease_next(L.UP, "Released") is None
    assert lease_sources("ReleaseIntended") == LIVE_LEASE_STATES
    for terminal in LEASE_TERMINAL:
        assert all(lease_next(terminal, row["trigger"]) is None for row in LEASE_TRANSITIONS)


def test_the_lease_diagram_draws_every_row() -> None:
    drawn = lease_mermaid()
    assert drawn.startswith(f"stateDiagram-v2\n    [*] --> {LEASE_INITIAL}\n")
    for row in LEASE_TRANSITIONS:
        for source in row["source"]:
            dest = row["dest"] or source
            line = next(x for x in drawn.splitlines() if x.startswith(f"    {source} --> {dest}:"))
            assert row["trigger"] in line
    docs = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
    assert f"```mermaid\n{drawn}```" in docs.read_text(encoding="utf-8")


def test_the_journal_refuses_a_write_the_table_has_no_row_for(tmp_path: Path) -> None:
    journal = open_journal(tmp_path / "journal.db")
    try:
        facts: dict[str, Any] = {
            "name": "c1",
            "campaign": "run-1",
            "fingerprint": "f",
            "profile": "p",
            "adapter": "skypilot",
            "request": {},
        }
        lease = journal.clusters.intend_launch(**facts, reason="first", owner="me")
        assert lease.state is L.LAUNCHING
        with pytest.raises(StaleState, match="is launching, not releasing"):
            journal.clusters.record_released(lease.id, "no")
        failed = journal.clusters.record_launch_failed(lease.id, "nothing launched")
        assert failed.state is L.FAILED
        with pytest.raises(StaleState, match="is failed, not launching or up"):
            journal.clusters.record_launched(failed.id, ["7"], "late")
    finally:
        journal.close()


def test_the_lease_choice_refuses_while_another_evaluation_is_not_done() -> None:
    busy = decide_lease("inv-b", "camp", ["inv-a", "inv-b"], reusable=True)
    assert busy.choice is LeaseChoice.REFUSE and "inv-a" in busy.why and "inv-b" not in busy.why
    assert decide_lease("inv-b", "camp", ["inv-b"], reusable=True).choice is LeaseChoice.REUSE
    assert decide_lease("inv-b", "camp", [], reusable=False).choice is LeaseChoice.LAUNCH
