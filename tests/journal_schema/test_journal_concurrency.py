"""Two writers on one journal file: no lost rows, and exactly one winner per compare-and-swap."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from tests.helpers.journal import create, job_name
from vibesys.errors import StaleState
from vibesys.journal_schema import Journal, open_journal, verify_journal
from vibesys.journal_schema.migrations import KNOWN
from vibesys.states import (
    CancelRequested,
    Collected,
    Event,
    FailureClass,
    Finished,
    InfraFailed,
    Outcome,
    SubmitIntended,
    Submitted,
)
from vibesys.states import JobState as S

#: Seconds a thread waits at a barrier before the test gives up on its partner.
PATIENCE = 60


def in_threads(
    count: int, work: Callable[[int], None], *barriers: threading.Barrier
) -> list[BaseException]:
    """Run `work(n)` for n in range(count) in threads; return what they raised.

    A thread that fails breaks `barriers`, so its partners fail too instead of waiting.
    """
    errors: list[BaseException] = []

    def guarded(n: int) -> None:
        try:
            work(n)
        except BaseException as exc:  # reported to the test below
            errors.append(exc)
            for barrier in barriers:
                barrier.abort()

    threads = [threading.Thread(target=guarded, args=(n,), daemon=True) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=4 * PATIENCE)
    assert not any(t.is_alive() for t in threads), "a writer hung"
    return errors


def events_for(invocation_id: str) -> list[Event]:
    return [
        SubmitIntended(1, job_name(invocation_id, 1)),
        Submitted(f"{invocation_id}-a"),
        InfraFailed(FailureClass.NODE_FAILED, "NODE_FAIL"),
        SubmitIntended(2, job_name(invocation_id, 2)),
        Submitted(f"{invocation_id}-b"),
        Finished(FailureClass.COMPLETED, 0),
        Collected(Outcome.COMPLETED, 0),
    ]


def test_two_writers_on_different_invocations_lose_nothing(journal_file: Path) -> None:
    per_writer = 15
    start = threading.Barrier(2, timeout=PATIENCE)

    def writer(n: int) -> None:
        journal = open_journal(journal_file)
        try:
            start.wait()
            for i in range(per_writer):
                ident = f"w{n}-{i:02d}"
                current = create(journal, ident)
                for event in events_for(ident):
                    current, _ = journal.commit_transition(current, event)
        finally:
            journal.close()

    open_journal(journal_file).close()  # created up front; see the next test for a fresh file
    assert in_threads(2, writer, start) == []
    journal = open_journal(journal_file)
    try:
        ids = journal.invocations.all_ids()
        assert len(ids) == 2 * per_writer
        rows = journal.conn.execute("SELECT count(*) FROM history").fetchone()[0]
        assert rows == 2 * per_writer * len(events_for("x"))
        assert {i.state for i in journal.invocations.list_invocations()} == {S.DONE}
        assert all(len(journal.invocations.attempts(i)) == 2 for i in ids)
        assert verify_journal(journal) == []
    finally:
        journal.close()


def test_writers_opening_a_fresh_file_at_once_all_succeed(tmp_path: Path) -> None:
    for round_ in range(5):
        path = tmp_path / f"fresh{round_}.db"
        start = threading.Barrier(4, timeout=PATIENCE)

        def opener(n: int, path: Path = path, start: threading.Barrier = start) -> None:
            start.wait()
            journal = open_journal(path)
            try:
                create(journal, f"inv-{n}")
            finally:
                journal.close()

        assert in_threads(4, opener, start) == []
        journal = open_journal(path)
        try:
            assert journal.invocations.all_ids() == ["inv-0", "inv-1", "inv-2", "inv-3"]
            applied = journal.conn.execute("SELECT name FROM _sqlite_migrations").fetchall()
            assert sorted(name for (name,) in applied) == sorted(KNOWN)
        finally:
            journal.close()


def test_on_one_invocation_exactly_one_writer_wins_each_swap(journal_file: Path) -> None:
    rounds = 25
    setup = open_journal(journal_file)
    current = create(setup, "inv-race")
    for event in events_for("inv-race")[:2]:
        current, _ = setup.commit_transition(current, event)
    assert current.state == S.RUNNING
    setup.close()

    read, swap = threading.Barrier(2, timeout=PATIENCE), threading.Barrier(2, timeout=PATIENCE)
    wins: list[list[int]] = [[] for _ in range(rounds)]
    stale: list[list[int]] = [[] for _ in range(rounds)]

    def writer(n: int) -> None:
        journal: Journal = open_journal(journal_file)
        try:
            for r in range(rounds):
                seen = journal.invocations.get("inv-race")
                read.wait()  # both have read the same version before either writes
                try:
                    journal.commit_transition(seen, CancelRequested(by=f"writer{n}"))
                    wins[r].append(n)
                except StaleState:
                    stale[r].append(n)
                swap.wait()  # the next round reads what this round wrote
        finally:
            journal.close()

    assert in_threads(2, writer, read, swap) == []
    assert [len(w) for w in wins] == [1] * rounds
    assert [len(s) for s in stale] == [1] * rounds
    journal = open_journal(journal_file)
    try:
        history = journal.invocations.history("inv-race")
        assert len(history) == 2 + rounds
        assert [h.seq for h in history] == list(range(1, rounds + 3))
        winners = [h.evidence["by"] for h in history[2:]]
        assert winners == [f"writer{w[0]}" for w in wins]
        assert journal.invocations.get("inv-race").version == 2 + rounds
        assert verify_journal(journal) == []
    finally:
        journal.close()
