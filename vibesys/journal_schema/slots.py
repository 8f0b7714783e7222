"""One concurrency cap per run, across every process of the run that shares this journal (m007,
`run_slots`): a ticket per command, first come first served; a slot is `active` from before the
command's submission until its job has left the scheduler.

A ticket whose owner (the broker process, host:pid:start) provably died is given back: at once
while it waits, or when it held a slot, once nothing of its job can still be in the scheduler
(no invocation yet, or one never submitted, or one DONE). Until then it is an orphan: it still
counts, and its invocation is named so that the caller can settle it (its client is gone).
"""

from __future__ import annotations

import sqlite3

from msgspec import Struct

from vibesys.journal_schema.clock import now_iso
from vibesys.journal_schema.journal_file import JournalFile
from vibesys.osutil.proc import identity_alive
from vibesys.states import JobState

__all__ = ["SlotStore", "SlotView"]

WAITING = "waiting"
ACTIVE = "active"


class SlotView(Struct, frozen=True):
    """Where a ticket stands in its run's line."""

    granted: bool
    #: the run's slots held, before this ticket took one
    active: int
    #: tickets of the run waiting ahead of this one
    ahead: int
    #: invocations of dead owners' slots whose jobs may still be in the scheduler
    orphans: tuple[str, ...] = ()


class SlotStore:
    """Slot of the journal."""

    def __init__(self, file: JournalFile) -> None:
        self.conn = file.conn
        self.write_txn = file.write_txn

    def slot_enqueue(self, run_id: str, owner: str) -> int:
        """A new ticket at the end of the run's line."""
        with self.write_txn() as conn:
            cursor = conn.execute(
                "INSERT INTO run_slots (run_id, owner, state, queued_at) VALUES (?,?,?,?)",
                (run_id, owner, WAITING, now_iso()),
            )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def slot_try(self, ticket: int, cap: int) -> SlotView:
        """Take a slot for `ticket` if it is first in line and fewer than `cap` are held; give
        back what dead owners no longer need on the way."""
        with self.write_txn() as conn:
            mine = conn.execute(
                "SELECT run_id, owner, state FROM run_slots WHERE ticket=?", (ticket,)
            ).fetchone()
            if mine is None:
                raise LookupError(f"run slot ticket {ticket} is gone")
            run_id, owner, state = mine
            rows = conn.execute(
                "SELECT ticket, owner, state, invocation_id FROM run_slots "
                "WHERE run_id=? AND ticket != ? ORDER BY ticket",
                (run_id, ticket),
            ).fetchall()
            dead = _dead_owners(rows, owner)
            active, ahead, orphans = 0, 0, []
            for other, holder, other_state, invocation in rows:
                if holder in dead and not self._still_needed(conn, other_state, invocation):
                    conn.execute("DELETE FROM run_slots WHERE ticket=?", (other,))
                elif other_state == ACTIVE:
                    active += 1
                    if holder in dead:
                        orphans.append(invocation)
                elif other < ticket:
                    ahead += 1
            granted = state == ACTIVE or (ahead == 0 and active < cap)
            if granted and state != ACTIVE:
                conn.execute(
                    "UPDATE run_slots SET state=?, active_at=? WHERE ticket=?",
                    (ACTIVE, now_iso(), ticket),
                )
        return SlotView(granted, active, ahead, tuple(orphans))

    @staticmethod
    def _still_needed(conn: sqlite3.Connection, state: str, invocation: str | None) -> bool:
        """Whether a dead owner's ticket must still count: it held a slot for an invocation
        that was (or may have been) submitted and is not DONE."""
        if state != ACTIVE or invocation is None:
            return False
        row = conn.execute(
            "SELECT state, attempt FROM invocations WHERE id=?", (invocation,)
        ).fetchone()
        if row is None:
            return False
        return row[0] != JobState.DONE and not (row[0] == JobState.PREPARED and row[1] == 0)

    def slot_orphans(self, run_id: str, owner: str) -> tuple[str, ...]:
        """The invocations of the run's slots whose owners (other than `owner`) died while
        their jobs may still be in the scheduler; dead owners' tickets no longer needed are
        given back on the way."""
        orphans: list[str] = []
        with self.write_txn() as conn:
            rows = conn.execute(
                "SELECT ticket, owner, state, invocation_id FROM run_slots WHERE run_id=? "
                "ORDER BY ticket",
                (run_id,),
            ).fetchall()
            dead = _dead_owners(rows, owner)
            for ticket, holder, state, invocation in rows:
                if holder not in dead:
                    continue
                if self._still_needed(conn, state, invocation):
                    orphans.append(invocation)
                else:
                    conn.execute("DELETE FROM run_slots WHERE ticket=?", (ticket,))
        return tuple(orphans)

    def slot_bind(self, ticket: int, invocation_id: str) -> None:
        """Name the invocation a held slot runs (recorded before it is submitted)."""
        with self.write_txn() as conn:
            conn.execute(
                "UPDATE run_slots SET invocation_id=? WHERE ticket=?", (invocation_id, ticket)
            )

    def slot_release(self, ticket: int) -> None:
        with self.write_txn() as conn:
            conn.execute("DELETE FROM run_slots WHERE ticket=?", (ticket,))

    def slot_counts(self, run_id: str) -> tuple[int, int]:
        """(active, waiting) tickets of the run, as recorded."""
        row = self.conn.execute(
            "SELECT coalesce(sum(state = ?), 0), coalesce(sum(state = ?), 0) FROM run_slots "
            "WHERE run_id=?",
            (ACTIVE, WAITING, run_id),
        ).fetchone()
        return int(row[0]), int(row[1])


def _dead_owners(rows: list[tuple[int, str, str, str | None]], owner: str) -> set[str]:
    """The owners of `rows`, other than `owner`, that provably died."""
    return {o for o in {row[1] for row in rows} - {owner} if identity_alive(o) is False}
