"""The UI's pure parts: log chunks end on character boundaries, the state diagram is the
transition table's (every edge and internal event, in a layout that never changes), and the
timeline reads an attempt's times from its record."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from vibesys.journal_schema.records import Attempt, HistoryRow, Invocation
from vibesys.journal_schema.settings import Settings
from vibesys.states import FailureClass, JobState
from vibesys.states.table import TRANSITIONS, dest_of, sources_of
from vibesys.ui import diagram, logs, timeline


@pytest.mark.parametrize(
    ("data", "whole"),
    [
        (b"plain", 5),
        ("é".encode(), 2),
        ("é".encode()[:1], 0),
        ("ab€".encode()[:-1], 2),
        ("ab€".encode()[:-2], 2),
        ("😀".encode()[:3], 0),
        ("😀".encode(), 4),
        (b"\xff\xfe", 2),  # invalid bytes are not waited for
        (b"", 0),
    ],
)
def test_a_chunk_never_ends_inside_a_character(data: bytes, whole: int) -> None:
    assert logs.complete(data) == whole


def test_reading_from_an_offset_holds_back_an_unfinished_character(tmp_path: Path) -> None:
    path = tmp_path / "stdout"
    path.write_bytes("line é".encode()[:-1])
    chunk = logs.read_from(path, "stdout", 0)
    assert (chunk.text, chunk.end) == ("line ", 5)
    assert logs.read_from(path, "stdout", 5).text == ""
    assert logs.read_from(path, "stdout", 5, final=True).text == "\ufffd"
    path.write_bytes("line é and more\n".encode())
    assert logs.read_from(path, "stdout", 5).text == "é and more\n"
    assert logs.read_from(path, "stdout", 99).end == 99  # cut back below the offset: nothing
    assert logs.read_from(tmp_path / "missing", "stdout", 0).size == 0


def test_a_tail_starts_at_a_line(tmp_path: Path) -> None:
    path = tmp_path / "stdout"
    path.write_bytes(b"".join(f"line {n}\n".encode() for n in range(1000)))
    chunk = logs.tail(path, "stdout", limit=100)
    assert chunk.text.startswith("line ") and chunk.text.endswith("line 999\n")
    assert chunk.end == chunk.size == path.stat().st_size and chunk.size - chunk.start < 100


def test_the_diagram_draws_the_table() -> None:
    svg = str(diagram.svg())
    drawn = set(re.findall(r'data-edge="([A-Z]+)-([A-Z]+)"', svg))
    any_state = diagram.from_any_state()
    assert any_state == {"Cancelled": JobState.DONE}
    for row in TRANSITIONS:
        for source in sources_of(row):
            dest = dest_of(row)
            if dest is None:  # internal: listed in its state's box
                assert f"↻ {row['trigger']}" in svg.split(f'data-state="{source}"')[1]
            elif any_state.get(row["trigger"]) != dest:
                assert (str(source), str(dest)) in drawn, row
    assert 'data-edge="any-Cancelled"' in svg
    assert {state for state in re.findall(r'data-state="([A-Z]+)"', svg)} == set(JobState)
    assert str(diagram.svg()) == svg  # deterministic


def test_the_layout_puts_the_happy_path_on_one_row() -> None:
    cells = diagram.layout()
    happy = [JobState.PREPARED, JobState.SUBMITTING, JobState.RUNNING]
    assert [cells[s] for s in happy] == [(0, 0), (1, 0), (2, 0)]
    assert cells[JobState.COLLECTING][1] == cells[JobState.DONE][1] == 0
    assert cells[JobState.DONE][0] == max(c for c, _ in cells.values())
    assert {cells[JobState.RETRYING][1], cells[JobState.UNRESOLVED][1]} == {-1, 1}


def test_the_current_state_and_the_path_are_marked() -> None:
    taken = [
        ("PREPARED", "SUBMITTING", "SubmitIntended"),
        ("SUBMITTING", "SUBMITTING", "SubmitDispatched"),
        ("SUBMITTING", "RUNNING", "Submitted"),
        ("RUNNING", "RETRYING", "InfraFailed"),
        ("RETRYING", "SUBMITTING", "SubmitIntended"),
        ("SUBMITTING", "SUBMITTING", "SubmitDispatched"),
        ("SUBMITTING", "RUNNING", "Submitted"),
    ]
    svg = str(diagram.svg(JobState.RUNNING, taken))
    assert 'class="state visited current" data-state="RUNNING"' in svg
    assert 'class="state" data-state="COLLECTING"' in svg
    assert 'class="edge taken" data-edge="SUBMITTING-RUNNING"' in svg
    assert "Submitted ×2" in svg and "↻ SubmitDispatched ×2" in svg
    assert 'class="edge" data-edge="RUNNING-COLLECTING"' in svg


T0 = datetime(2030, 1, 1, tzinfo=UTC)


def _t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _at(seconds: float) -> str:
    return _t(seconds).isoformat()


def test_the_timeline_reads_the_record() -> None:
    inv = Invocation.from_row(
        {
            "id": "1a",
            "label": None,
            "adapter": "sbatch",
            "command": "[]",
            "request": "{}",
            "state": "RUNNING",
            "version": 9,
            "attempt": 2,
            "max_retries": 2,
            "retries": 1,
            "outcome": None,
            "exit_code": None,
            "failure_class": None,
            "cancel_requested": 0,
            "not_before": None,
            "invocation_dir": "/r",
            "created_at": _at(0),
            "updated_at": _at(30),
            "lease_owner": None,
            "lease_expires_at": None,
            "request_version": 1,
            "cwd": None,
            "env_file": None,
            "site_digest": None,
            "settings": Settings().dumps(),
            "a_job_id": "72",
            "a_dispatched_at": _at(21),
            "a_fence_intended_at": None,
            "a_intended_at": _at(20),
            "a_job_name": "vibesys-1a-2",
        }
    )
    attempts = [
        Attempt(1, "n-1", "71", FailureClass.NODE_FAILED, _t(1), _t(2), _t(1.5), _t(8),
                "kind=fence", {"start": _at(4), "end": _at(9)}),
        Attempt(2, "n-2", "72", None, _t(20), _t(22), _t(21)),
    ]  # fmt: skip
    history = [
        HistoryRow(1, JobState.PREPARED, JobState.SUBMITTING, "SubmitIntended", _t(1),
                   {"attempt": 1}),
        HistoryRow(2, JobState.SUBMITTING, JobState.RUNNING, "Submitted", _t(2), {}),
        HistoryRow(3, JobState.RUNNING, JobState.UNRESOLVED, "OutcomeUnknown", _t(7), {}),
        HistoryRow(4, JobState.UNRESOLVED, JobState.UNRESOLVED, "FenceIntended", _t(8), {}),
        HistoryRow(5, JobState.UNRESOLVED, JobState.RETRYING, "InfraFailed", _t(10),
                   {"failure_class": "NODE_FAILED", "not_before": _at(19)}),
        HistoryRow(6, JobState.RETRYING, JobState.SUBMITTING, "SubmitIntended", _t(20),
                   {"attempt": 2}),
        HistoryRow(7, JobState.SUBMITTING, JobState.RUNNING, "Submitted", _t(22), {}),
    ]  # fmt: skip
    seen = {"sight": "queued", "reason": "Priority"}
    first, second = timeline.lanes(inv, attempts, history, seen, T0 + timedelta(seconds=40))
    spans = {s.kind: (s.start, s.end, s.open, s.text) for s in first.spans}
    assert spans["queued"][:2] == (T0 + timedelta(seconds=2), T0 + timedelta(seconds=4))
    assert spans["running"][:3] == (T0 + timedelta(seconds=4), T0 + timedelta(seconds=9), False)
    assert {m.kind for m in first.marks} == {"unknown", "fence", "retry", "fenced"}
    assert "next attempt after" in next(m.text for m in first.marks if m.kind == "retry")
    queued = next(s for s in second.spans if s.kind == "queued")
    assert queued.open and queued.text == "Priority"
    assert queued.end == T0 + timedelta(seconds=40)
    assert "running" not in {s.kind for s in second.spans}  # not started yet
    svg = str(timeline.svg([first, second]))
    assert svg.count('class="lane-label"') == 2 and "Priority" in svg


def test_the_broker_label_is_the_one_the_broker_gives() -> None:
    from vibesys.ui.queries import BROKER_LABEL

    runner = Path(__file__).resolve().parents[2] / "vibesys" / "broker" / "engine_runner.py"
    assert f'label="{BROKER_LABEL}"' in runner.read_text(encoding="utf-8")
