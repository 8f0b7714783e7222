"""`verify_journal`: silent on a good journal, names the first bad row of a tampered one."""

from __future__ import annotations

import json

import pytest

from tests.helpers.journal import Drive, NewInvocation
from vibesys.journal_schema import Journal, verify_journal
from vibesys.states import (
    Collected,
    Event,
    FailureClass,
    Finished,
    InfraFailed,
    Outcome,
    OutcomeUnknown,
    SubmitIntended,
    Submitted,
)

PATH: list[Event] = [
    SubmitIntended(1, "vibesys-v-1"),
    Submitted("11"),
    InfraFailed(FailureClass.PREEMPTED, "PREEMPTED"),
    SubmitIntended(2, "vibesys-v-2"),
    Submitted("12"),
    Finished(FailureClass.COMPLETED, 0),
    Collected(Outcome.COMPLETED, 0),
]


@pytest.fixture
def good(journal: Journal, new_invocation: NewInvocation, drive: Drive) -> Journal:
    drive(new_invocation("inv-1"), PATH)
    drive(new_invocation("inv-2"), [SubmitIntended(1, "vibesys-w-1"), OutcomeUnknown("lost")])
    new_invocation("inv-3")
    return journal


def _tamper(journal: Journal, sql: str, *params: object) -> None:
    journal.conn.execute("DROP TRIGGER history_no_update")
    journal.conn.execute("DROP TRIGGER history_no_delete")
    journal.conn.execute(sql, params)


def test_a_good_journal_has_no_problems(good: Journal) -> None:
    assert verify_journal(good) == []


def test_an_empty_journal_has_no_problems(journal: Journal) -> None:
    assert verify_journal(journal) == []


def test_an_edited_to_state_is_named_by_its_row(good: Journal) -> None:
    _tamper(good, "UPDATE history SET to_state='DONE' WHERE invocation_id='inv-1' AND seq=5")
    [problem] = verify_journal(good)
    assert (problem.invocation_id, problem.seq) == ("inv-1", 5)
    assert "recorded DONE, the table says RUNNING" in problem.message
    assert str(problem).startswith("inv-1 seq 5: ")


def test_the_first_of_several_bad_rows_is_named(good: Journal) -> None:
    _tamper(
        good, "UPDATE history SET from_state='UNRESOLVED' WHERE invocation_id='inv-1' AND seq=6"
    )
    good.conn.execute(
        "UPDATE history SET to_state='COLLECTING' WHERE invocation_id='inv-1' AND seq=3"
    )
    [problem] = verify_journal(good)
    assert (problem.invocation_id, problem.seq) == ("inv-1", 3)


def test_a_gap_in_the_history_is_named(good: Journal) -> None:
    # Rows 1-2 of inv-2 exist; row 4 appears without row 3.
    good.conn.execute(
        "INSERT INTO history (invocation_id, seq, from_state, to_state, event, evidence, at) "
        "VALUES ('inv-2', 4, 'UNRESOLVED', 'RUNNING', 'Submitted', ?, 'x')",
        (json.dumps({"job_id": "1", "observation": ""}),),
    )
    [problem] = verify_journal(good)
    assert (problem.invocation_id, problem.seq) == ("inv-2", 4)
    assert "expected sequence number 3" in problem.message


def test_a_deleted_row_is_noticed(good: Journal) -> None:
    _tamper(good, "DELETE FROM history WHERE invocation_id='inv-1' AND seq=2")
    [problem] = verify_journal(good)
    assert (problem.invocation_id, problem.seq) == ("inv-1", 3)


def test_an_unknown_event_is_named(good: Journal) -> None:
    _tamper(good, "UPDATE history SET event='Teleported' WHERE invocation_id='inv-2' AND seq=2")
    [problem] = verify_journal(good)
    assert (problem.invocation_id, problem.seq) == ("inv-2", 2)
    assert "Teleported" in problem.message


def test_evidence_that_does_not_decode_is_named(good: Journal) -> None:
    _tamper(good, 'UPDATE history SET evidence=\'{"attempt": "one"}\' WHERE seq=1')
    problems = verify_journal(good)
    assert [(p.invocation_id, p.seq) for p in problems] == [("inv-1", 1), ("inv-2", 1)]


def test_a_state_unknown_to_the_enum_is_named(good: Journal) -> None:
    _tamper(good, "UPDATE history SET to_state='LIMBO' WHERE invocation_id='inv-2' AND seq=2")
    [problem] = verify_journal(good)
    assert (problem.invocation_id, problem.seq) == ("inv-2", 2)


def test_a_current_state_that_disagrees_with_history(good: Journal) -> None:
    good.conn.execute("UPDATE invocations SET state='DONE' WHERE id='inv-2'")
    [problem] = verify_journal(good)
    assert (problem.invocation_id, problem.seq) == ("inv-2", None)
    assert "state is DONE, history ends in UNRESOLVED" in problem.message


def test_a_version_that_disagrees_with_history(good: Journal) -> None:
    good.conn.execute("UPDATE invocations SET version=version+1 WHERE id='inv-1'")
    [problem] = verify_journal(good)
    assert problem.invocation_id == "inv-1"
    assert "version 8 != 7 rows" in problem.message


def test_attempt_numbers_must_count_from_one(good: Journal) -> None:
    good.conn.execute("UPDATE attempts SET attempt=3 WHERE invocation_id='inv-1' AND attempt=2")
    [problem] = verify_journal(good)
    assert problem.invocation_id == "inv-1"
    assert "attempt numbers" in problem.message


def test_the_current_attempt_must_match(good: Journal) -> None:
    good.conn.execute("UPDATE invocations SET attempt=1 WHERE id='inv-1'")
    [problem] = verify_journal(good)
    assert problem.invocation_id == "inv-1"
    assert "current attempt" in problem.message


def test_one_problem_per_bad_invocation_in_id_order(good: Journal) -> None:
    good.conn.execute("UPDATE invocations SET state='RUNNING' WHERE id IN ('inv-3', 'inv-1')")
    assert [p.invocation_id for p in verify_journal(good)] == ["inv-1", "inv-3"]
