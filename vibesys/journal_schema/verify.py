"""`journal verify`: replay every history through the transition table and check integrity."""

from __future__ import annotations

import sqlite3

from msgspec import Struct

from vibesys.errors import NotAJournal
from vibesys.journal_schema.codec import decode_event
from vibesys.journal_schema.store import Journal
from vibesys.states import JobState, ReplayMismatch, Step, replay


class Problem(Struct, frozen=True):
    invocation_id: str
    seq: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.invocation_id} seq {self.seq}" if self.seq else self.invocation_id
        return f"{where}: {self.message}"


def verify_journal(journal: Journal) -> list[Problem]:
    """Every problem found, first bad row of each invocation first; empty when all is well."""
    problems: list[Problem] = []
    try:
        integrity = journal.conn.execute("PRAGMA integrity_check").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        return [Problem("journal", None, f"SQLite integrity check failed: {exc}")]
    if integrity != "ok":
        problems.append(Problem("journal", None, f"SQLite integrity check: {integrity}"))
    for invocation_id in journal.invocations.all_ids():
        problem = _verify_one(journal, invocation_id)
        if problem is not None:
            problems.append(problem)
    return problems


def _verify_one(journal: Journal, invocation_id: str) -> Problem | None:
    invocation = journal.invocations.get(invocation_id)
    steps: list[Step] = []
    for seq, src, dst, kind, evidence in journal.invocations.raw_history(invocation_id):
        try:
            steps.append(Step(seq, JobState(src), JobState(dst), decode_event(kind, evidence)))
        except (NotAJournal, ValueError) as exc:
            return Problem(invocation_id, seq, str(exc))
    try:
        final = replay(steps)
    except ReplayMismatch as exc:
        return Problem(invocation_id, exc.seq, str(exc).split(": ", 1)[1])
    if final != invocation.state:
        return Problem(invocation_id, None, f"state is {invocation.state}, history ends in {final}")
    if invocation.version != len(steps):
        return Problem(invocation_id, None, f"version {invocation.version} != {len(steps)} rows")
    attempts = journal.invocations.attempts(invocation_id)
    if [a.attempt for a in attempts] != list(range(1, len(attempts) + 1)):
        return Problem(invocation_id, None, "attempt numbers are not 1..n")
    if attempts and invocation.attempt != attempts[-1].attempt:
        return Problem(invocation_id, None, "current attempt does not match the attempts table")
    return None
