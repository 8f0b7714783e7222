"""Golden journals: hand-written histories in tests/golden/journals/*.json pin the behaviour.

Each is replayed through `decide()` with the public `replay()` helper, then committed event by
event into a real journal whose history must come out exactly as written (ignoring `at`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.journal import commit_all, create
from vibesys.journal_schema import Journal, decode_event, verify_journal
from vibesys.states import (
    INITIAL,
    Finish,
    JobState,
    ReplayMismatch,
    Step,
    decide,
    replay,
)

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden" / "journals"
FILES = sorted(GOLDEN_DIR.glob("*.json"))


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def steps_of(golden: dict[str, Any]) -> list[Step]:
    return [
        Step(
            row["seq"],
            JobState(row["from"]),
            JobState(row["to"]),
            decode_event(row["event"], json.dumps(row["evidence"])),
        )
        for row in golden["history"]
    ]


def test_there_are_golden_journals() -> None:
    names = {path.stem for path in FILES}
    assert len(names) >= 4
    assert {"completed", "retry_budget_spent", "crash_in_submitting_then_found"} <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_golden_file_is_well_formed(path: Path) -> None:
    golden = load(path)
    assert set(golden) == {"description", "invocation", "history", "expected"}
    assert [row["seq"] for row in golden["history"]] == list(range(1, len(golden["history"]) + 1))
    for row in golden["history"]:
        assert set(row) == {"seq", "from", "to", "event", "evidence"}, row
    assert golden["history"][0]["from"] == INITIAL


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_golden_history_replays_to_the_expected_end(path: Path) -> None:
    golden = load(path)
    expected = golden["expected"]
    steps = steps_of(golden)
    assert replay(steps) == expected["state"]
    # And step by step through decide(): the last decision carries the recorded outcome.
    state, last = INITIAL, None
    for step in steps:
        last = decide(state, step.event)
        assert last.state == step.to_state, f"seq {step.seq}"
        state = last.state
    assert last is not None
    if expected["state"] == JobState.DONE:
        assert last.effects == (Finish(expected["outcome"], expected["exit_code"]),)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_a_tampered_golden_history_is_caught(path: Path) -> None:
    steps = steps_of(load(path))
    middle = len(steps) // 2
    bad = steps[middle]
    wrong = next(s for s in JobState if s != bad.to_state)
    steps[middle] = Step(bad.seq, bad.from_state, wrong, bad.event)
    with pytest.raises(ReplayMismatch) as mismatch:
        replay(steps)
    assert mismatch.value.seq == bad.seq


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_golden_history_committed_to_a_journal_comes_out_the_same(
    journal: Journal, path: Path
) -> None:
    golden = load(path)
    ident = golden["invocation"]["id"]
    inv = create(journal, ident, max_retries=golden["invocation"]["max_retries"])
    inv = commit_all(journal, inv, [step.event for step in steps_of(golden)])

    recorded = [
        {key: value for key, value in h.to_json().items() if key != "at"}
        for h in journal.invocations.history(ident)
    ]
    assert recorded == golden["history"]
    assert [h.at for h in journal.invocations.history(ident)] == sorted(
        h.at for h in journal.invocations.history(ident)
    )
    assert all(h.at > inv.created_at for h in journal.invocations.history(ident))

    expected = golden["expected"]
    assert inv.state == expected["state"]
    assert inv.outcome == expected["outcome"]
    assert inv.exit_code == expected["exit_code"]
    assert inv.failure_class == expected["failure_class"]
    assert inv.retries == expected["retries"]
    assert inv.cancel_requested is expected["cancel_requested"]
    assert inv.version == len(golden["history"])
    keys = ("attempt", "job_name", "job_id", "failure_class")
    attempts = [{key: getattr(a, key) for key in keys} for a in journal.invocations.attempts(ident)]
    assert attempts == expected["attempts"]
    assert inv.attempt == len(expected["attempts"])
    assert verify_journal(journal) == []


def test_all_goldens_share_one_journal(journal: Journal) -> None:
    # Job names are unique across the journal; the goldens must not collide with each other.
    for path in FILES:
        golden = load(path)
        inv = create(journal, golden["invocation"]["id"])
        commit_all(journal, inv, [step.event for step in steps_of(golden)])
    assert len(journal.invocations.all_ids()) == len(FILES)
    assert journal.invocations.active() == []
    assert verify_journal(journal) == []
