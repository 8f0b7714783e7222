"""Journal writes and reads: compare-and-swap transitions, attempts, outcomes, prefix lookup."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.helpers.journal import T0, Drive, NewInvocation, job_name
from vibesys.errors import InvalidTransition, StaleState, UsageError
from vibesys.journal_schema import Journal, iso, journal_path
from vibesys.states import (
    Cancel,
    Cancelled,
    CancelRequested,
    Collected,
    Event,
    FailureClass,
    Finish,
    Finished,
    InfraFailed,
    JobState,
    Outcome,
    Rejected,
    RetryBudgetSpent,
    Submit,
    SubmitDispatched,
    SubmitIntended,
    Submitted,
)
from vibesys.states import JobState as S


def _counts(journal: Journal) -> list[int]:
    """Rows in invocations, attempts and history."""
    return [
        journal.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("invocations", "attempts", "history")
    ]


def test_a_new_invocation_is_prepared(journal: Journal, new_invocation: NewInvocation) -> None:
    inv = new_invocation("inv-new", command=["echo", "a b"], label="nightly")
    assert (inv.state, inv.version, inv.attempt, inv.retries) == (S.PREPARED, 0, 0, 0)
    assert (inv.outcome, inv.exit_code, inv.failure_class) == (None, None, None)
    assert inv.command == ["echo", "a b"]
    assert inv.recorded_request == {"artifacts": ["out.json"]}
    assert inv.label == "nightly"
    assert inv.created_at == inv.updated_at == T0
    assert (inv.lease_owner, inv.lease_expires_at) == (None, None)
    assert journal.invocations.history("inv-new") == []
    assert journal.invocations.attempts("inv-new") == []


def test_a_transition_is_recorded_with_its_evidence(
    journal: Journal, new_invocation: NewInvocation
) -> None:
    inv = new_invocation("inv-tx")
    moment = T0 + timedelta(minutes=5)
    after, decision = journal.commit_transition(
        inv, SubmitIntended(1, job_name("inv-tx", 1)), now=moment
    )
    assert decision.effects == ()
    assert (after.state, after.version, after.attempt) == (S.SUBMITTING, 1, 1)
    assert (after.job_name, after.dispatched, after.job_id) == ("vibesys-inv-tx-1", False, None)
    assert after.updated_at == moment
    dispatched, decision = journal.commit_transition(
        after, SubmitDispatched(1, job_name("inv-tx", 1)), now=moment
    )
    assert decision.effects == (Submit(1, job_name("inv-tx", 1)),)
    assert (dispatched.state, dispatched.version, dispatched.dispatched) == (S.SUBMITTING, 2, True)
    assert journal.invocations.get("inv-tx") == dispatched
    assert journal.invocations.attempts("inv-tx")[0].dispatched_at == moment
    row = journal.invocations.history("inv-tx")[0]
    assert (row.seq, row.from_state, row.to_state, row.event) == (
        1,
        S.PREPARED,
        S.SUBMITTING,
        "SubmitIntended",
    )
    assert row.evidence == {"attempt": 1, "job_name": "vibesys-inv-tx-1"}
    assert row.at == moment and iso(row.at) == "2030-01-01T00:05:00.000000+00:00"


def test_a_stale_invocation_loses_and_writes_nothing(
    journal: Journal, new_invocation: NewInvocation
) -> None:
    stale = new_invocation("inv-cas")
    fresh, _ = journal.commit_transition(stale, SubmitIntended(1, job_name("inv-cas", 1)))
    before = (
        _counts(journal),
        journal.invocations.raw_history("inv-cas"),
        journal.invocations.get("inv-cas"),
    )
    # PREPARED still accepts Cancelled, so only the compare-and-swap can refuse it.
    with pytest.raises(StaleState, match="inv-cas"):
        journal.commit_transition(stale, Cancelled("user gave up"))
    assert (
        _counts(journal),
        journal.invocations.raw_history("inv-cas"),
        journal.invocations.get("inv-cas"),
    ) == before
    assert len(journal.invocations.history("inv-cas")) == 1
    assert journal.invocations.get("inv-cas") == fresh


def test_the_version_guards_transitions_that_keep_the_state(
    journal: Journal, new_invocation: NewInvocation, drive: Drive
) -> None:
    inv = drive(new_invocation("inv-ver"), [SubmitIntended(1, "n-1"), Submitted("7")])
    moved, _ = journal.commit_transition(inv, CancelRequested(by="alice"))
    assert moved.state == inv.state == S.RUNNING and moved.version == inv.version + 1
    with pytest.raises(StaleState):
        journal.commit_transition(inv, CancelRequested(by="bob"))
    assert [h.evidence for h in journal.invocations.history("inv-ver")][-1] == {"by": "alice"}
    assert len(journal.invocations.history("inv-ver")) == moved.version == 3


def test_a_refused_event_writes_nothing(journal: Journal, new_invocation: NewInvocation) -> None:
    inv = new_invocation("inv-bad")
    before = _counts(journal)
    with pytest.raises(InvalidTransition):
        journal.commit_transition(inv, Collected(Outcome.COMPLETED, 0))
    assert _counts(journal) == before
    assert journal.invocations.get("inv-bad") == inv


def test_a_failing_transaction_rolls_back_every_table(
    journal: Journal, new_invocation: NewInvocation
) -> None:
    # An attempt row that is already there (planted behind the journal's back) makes the
    # attempts insert fail, after the state update and the history append, which must be
    # rolled back too.
    other = new_invocation("inv-b")
    with journal.write_txn() as conn:
        conn.execute(
            "INSERT INTO attempts (invocation_id, attempt, job_name, intended_at) "
            "VALUES ('inv-b', 1, 'planted', 'then')"
        )
    before = _counts(journal)
    with pytest.raises(sqlite3.IntegrityError):
        journal.commit_transition(other, SubmitIntended(1, "vibesys-inv-b-1"))
    assert _counts(journal) == before
    assert journal.invocations.get("inv-b") == other
    assert not journal.conn.in_transaction
    # ... and the connection is usable afterwards.
    with journal.write_txn() as conn:
        conn.execute("DELETE FROM attempts WHERE invocation_id='inv-b'")
    after, _ = journal.commit_transition(other, SubmitIntended(1, "vibesys-inv-b-1"))
    assert after.state == S.SUBMITTING


def test_attempts_record_name_job_id_and_failure_class(
    journal: Journal, new_invocation: NewInvocation, drive: Drive
) -> None:
    inv = drive(
        new_invocation("inv-att"),
        [
            SubmitIntended(1, job_name("inv-att", 1)),
            Submitted("1001", "Submitted batch job 1001"),
            InfraFailed(FailureClass.NODE_FAILED, "NODE_FAIL", "2030-01-01T00:10:00+00:00"),
        ],
    )
    assert (inv.state, inv.retries, inv.failure_class) == (S.RETRYING, 1, FailureClass.NODE_FAILED)
    assert inv.not_before == datetime(2030, 1, 1, 0, 10, tzinfo=UTC)
    inv = drive(inv, [SubmitIntended(2, job_name("inv-att", 2)), Submitted("1002")])
    assert (inv.attempt, inv.not_before) == (2, None)
    inv = drive(
        inv,
        [Finished(FailureClass.APPLICATION_FAILED, 3), Collected(Outcome.APPLICATION_FAILED, 3)],
    )
    attempts = journal.invocations.attempts("inv-att")
    assert [(a.attempt, a.job_name, a.job_id, a.failure_class) for a in attempts] == [
        (1, "vibesys-inv-att-1", "1001", FailureClass.NODE_FAILED),
        (2, "vibesys-inv-att-2", "1002", FailureClass.APPLICATION_FAILED),
    ]
    times = [(a.intended_at, a.submitted_at) for a in attempts]
    assert times == [(T0 + timedelta(seconds=s), T0 + timedelta(seconds=s + 1)) for s in (1, 4)]


def test_an_attempt_found_after_an_unknown_outcome_gets_its_job_id(
    journal: Journal, new_invocation: NewInvocation, drive: Drive
) -> None:
    from vibesys.states import OutcomeUnknown

    drive(
        new_invocation("inv-found"),
        [SubmitIntended(1, "found-1"), OutcomeUnknown("killed mid-submit"), Submitted("55")],
    )
    [attempt] = journal.invocations.attempts("inv-found")
    assert (attempt.job_name, attempt.job_id) == ("found-1", "55")


DONE_ROUTES: list[tuple[list[Event], Outcome, int | None, FailureClass | None]] = [
    (
        [SubmitIntended(1, "n1"), Submitted("1"), Finished(FailureClass.COMPLETED, 0),
         Collected(Outcome.COMPLETED, 0)],
        Outcome.COMPLETED, 0, FailureClass.COMPLETED,
    ),
    (
        [SubmitIntended(1, "n1"), Submitted("1"), Finished(FailureClass.APPLICATION_FAILED, 137),
         Collected(Outcome.APPLICATION_FAILED, 137)],
        Outcome.APPLICATION_FAILED, 137, FailureClass.APPLICATION_FAILED,
    ),
    ([Cancelled("before submit")], Outcome.CANCELLED, None, None),
    ([SubmitIntended(1, "n1"), Rejected("invalid partition")], Outcome.REJECTED, None, None),
    (
        [SubmitIntended(1, "n1"), Submitted("1"), InfraFailed(FailureClass.PREEMPTED, "x"),
         RetryBudgetSpent(FailureClass.PREEMPTED, 0)],
        Outcome.INFRA_FAILED, None, FailureClass.PREEMPTED,
    ),
]  # fmt: skip


@pytest.mark.parametrize(("events", "outcome", "code", "failure_class"), DONE_ROUTES)
def test_done_records_outcome_and_exit_code(
    new_invocation: NewInvocation,
    drive: Drive,
    events: list[Event],
    outcome: Outcome,
    code: int | None,
    failure_class: FailureClass | None,
) -> None:
    inv = new_invocation("inv-done")
    for event in events[:-1]:
        inv = drive(inv, [event])
        assert inv.outcome is None, "only DONE carries an outcome"
    inv = drive(inv, events[-1:])
    assert (inv.state, inv.outcome, inv.exit_code) == (S.DONE, outcome, code)
    assert inv.failure_class == failure_class
    assert inv.version == len(events)


def test_the_collected_exit_code_is_the_final_one(
    new_invocation: NewInvocation, drive: Drive
) -> None:
    # The scheduler did not know the code; the marker brought home by collection does.
    inv = drive(
        new_invocation("inv-code"),
        [SubmitIntended(1, "c-1"), Submitted("3"), Finished(FailureClass.APPLICATION_FAILED, None)],
    )
    assert (inv.state, inv.exit_code) == (S.COLLECTING, None)
    inv = drive(inv, [Collected(Outcome.APPLICATION_FAILED, 3, "marker: exit 3")])
    assert (inv.outcome, inv.exit_code) == (Outcome.APPLICATION_FAILED, 3)


def test_cancel_request_is_flagged(
    journal: Journal, new_invocation: NewInvocation, drive: Drive
) -> None:
    inv = drive(new_invocation("inv-cx"), [SubmitIntended(1, "cx-1"), Submitted("9")])
    assert inv.cancel_requested is False
    inv, decision = journal.commit_transition(inv, CancelRequested(by="alice"))
    assert (inv.state, inv.cancel_requested, decision.effects) == (S.RUNNING, True, (Cancel(),))
    inv, decision = journal.commit_transition(inv, Cancelled("scancel"))
    assert decision.effects == (Finish(Outcome.CANCELLED, None),)
    assert (inv.state, inv.outcome) == (S.DONE, Outcome.CANCELLED)


@pytest.fixture
def three(journal: Journal, new_invocation: NewInvocation) -> Journal:
    for n, ident in enumerate(["aaa111", "aaa222", "bbb333"]):
        new_invocation(ident, now=T0 + timedelta(seconds=n))
    return journal


@pytest.mark.parametrize(
    ("prefix", "found"),
    [("b", "bbb333"), ("aaa1", "aaa111"), ("aaa2", "aaa222"), ("aaa111", "aaa111")],
)
def test_resolve_by_unique_prefix(three: Journal, prefix: str, found: str) -> None:
    assert three.invocations.resolve(prefix).id == found


def test_resolve_refuses_an_ambiguous_prefix(three: Journal) -> None:
    with pytest.raises(UsageError, match="ambiguous"):
        three.invocations.resolve("aaa")


@pytest.mark.parametrize("prefix", ["c", "aab", "aaa3", "aaa1111", "a%", "a_a", "AAA"])
def test_resolve_refuses_an_unknown_id(three: Journal, prefix: str) -> None:
    with pytest.raises(UsageError, match=f"unknown invocation {prefix}"):
        three.invocations.resolve(prefix)


def test_resolve_needs_a_prefix(three: Journal) -> None:
    with pytest.raises(UsageError, match="required"):
        three.invocations.resolve("")


def test_get_of_an_unknown_id(journal: Journal) -> None:
    with pytest.raises(UsageError, match="unknown invocation nope"):
        journal.invocations.get("nope")


def test_listing_and_active(three: Journal, drive: Drive) -> None:
    drive(three.invocations.get("aaa222"), [Cancelled("never mind")])
    assert [i.id for i in three.invocations.list_invocations()] == ["aaa111", "aaa222", "bbb333"]
    assert [i.id for i in three.invocations.list_invocations(S.DONE)] == ["aaa222"]
    assert [i.id for i in three.invocations.list_invocations(S.PREPARED)] == ["aaa111", "bbb333"]
    assert [i.id for i in three.invocations.active()] == ["aaa111", "bbb333"]
    assert three.invocations.all_ids() == ["aaa111", "aaa222", "bbb333"]


def test_show_json_has_the_contracted_keys(
    journal: Journal, new_invocation: NewInvocation, drive: Drive
) -> None:
    inv = drive(new_invocation("inv-js"), DONE_ROUTES[0][0])
    shown = json.loads(
        json.dumps(
            inv.to_json(journal.invocations.attempts(inv.id), journal.invocations.history(inv.id))
        )
    )
    assert {
        "id",
        "state",
        "outcome",
        "exit_code",
        "adapter",
        "command",
        "attempts",
        "history",
    } <= set(shown)
    assert (shown["state"], shown["outcome"], shown["exit_code"]) == ("DONE", "COMPLETED", 0)
    assert shown["command"] == ["python", "-c", "print('hi')"]
    assert shown["attempts"] == [
        {
            "attempt": 1,
            "job_name": "n1",
            "job_id": "1",
            "failure_class": "COMPLETED",
            "intended_at": iso(T0 + timedelta(seconds=1)),
            "dispatched_at": None,
            "submitted_at": iso(T0 + timedelta(seconds=2)),
            "fence_intended_at": None,
            "claim": None,
            "provenance": {},
        }
    ]
    assert [(h["seq"], h["from"], h["to"], h["event"]) for h in shown["history"]] == [
        (1, "PREPARED", "SUBMITTING", "SubmitIntended"),
        (2, "SUBMITTING", "RUNNING", "Submitted"),
        (3, "RUNNING", "COLLECTING", "Finished"),
        (4, "COLLECTING", "DONE", "Collected"),
    ]
    assert all({"at", "evidence"} <= set(h) for h in shown["history"])


def test_journal_path_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("VIBESYS_JOURNAL", raising=False)
    assert journal_path() == Path(".vibesys") / "journal.db"
    monkeypatch.setenv("VIBESYS_JOURNAL", str(tmp_path / "env.db"))
    assert journal_path() == tmp_path / "env.db"
    assert journal_path(tmp_path / "flag.db") == tmp_path / "flag.db"


def test_iso_is_utc_with_microseconds() -> None:
    from datetime import datetime, timezone

    plus_two = timezone(timedelta(hours=2))
    assert iso(datetime(2030, 1, 1, 2, 0, tzinfo=plus_two)) == "2030-01-01T00:00:00.000000+00:00"
    assert JobState("DONE") is S.DONE


def test_the_commit_clock_writes_what_iso_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    # now_iso() makes the text up to the second once a second: across seconds, back and
    # forth, it must say exactly what iso() of the same moment says.
    from datetime import UTC, datetime, timedelta

    from vibesys.journal_schema import clock

    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    moments = [
        1_796_083_199_999_999_999,  # the last microsecond of a day, then the next day
        1_796_083_200_000_000_000,
        1_796_083_200_000_001_500,
        1_796_083_201_123_456_789,
        1_796_083_200_999_999_000,  # back to an earlier second
        1_830_297_600_000_000_000,  # a year later
    ]
    for ns in moments:
        monkeypatch.setattr(clock.time, "time_ns", lambda ns=ns: ns)
        assert clock.now_iso() == clock.iso(epoch + timedelta(microseconds=ns // 1000)), ns
