"""The campaign queue (m011): one evaluation at a time per campaign, the others waiting in the
order they were recorded.

An invocation of a campaign joins the queue in the transaction that records it (PREPARED), so
the order is the journal's and survives every restart. The planner submits it only when
nothing that joined before it is still open (`ahead` is empty): an invocation ahead that is
running, retrying or unresolved may still hold the campaign's cluster. It leaves the queue by
ending (DONE); its row stays as history.
"""

from __future__ import annotations

import sqlite3

from msgspec import Struct

from vibesys.journal_schema.journal_file import JournalFile
from vibesys.states import JobState

__all__ = ["QueuePlace", "QueueStore", "join_queue"]

_AHEAD = (
    "SELECT q.invocation_id FROM campaign_queue q JOIN invocations i ON i.id = q.invocation_id"
    " WHERE q.campaign = ? AND q.seq < ? AND i.state != ? ORDER BY q.seq"
)


class QueuePlace(Struct, frozen=True):
    """Where one invocation stands in its campaign's queue."""

    campaign: str
    #: the open invocations that joined before it, oldest first (empty: its turn)
    ahead: tuple[str, ...]

    @property
    def position(self) -> int:
        return len(self.ahead)

    def describe(self) -> str:
        if not self.ahead:
            return f"its turn in campaign {self.campaign}"
        return (
            f"waiting in campaign {self.campaign}'s queue: {self.position} ahead "
            f"({self.ahead[0]} first; one evaluation at a time per campaign)"
        )


def join_queue(conn: sqlite3.Connection, campaign: str, invocation_id: str, at: str) -> None:
    """Put `invocation_id` at the end of `campaign`'s queue (inside the caller's transaction)."""
    conn.execute(
        "INSERT INTO campaign_queue (campaign, invocation_id, joined_at) VALUES (?,?,?)",
        (campaign, invocation_id, at),
    )


class QueueStore:
    """Campaign-queue of the journal."""

    def __init__(self, file: JournalFile) -> None:
        self.conn = file.conn

    def queue_place(self, invocation_id: str) -> QueuePlace | None:
        """`invocation_id`'s place in its campaign's queue; None when it is in none."""
        found = self.conn.execute(
            "SELECT campaign, seq FROM campaign_queue WHERE invocation_id=?", (invocation_id,)
        ).fetchone()
        if found is None:
            return None
        campaign, seq = found
        ahead = self.conn.execute(_AHEAD, (campaign, seq, JobState.DONE)).fetchall()
        return QueuePlace(campaign, tuple(row[0] for row in ahead))

    def waiting(self) -> dict[str, QueuePlace]:
        """Every invocation that waits for its turn (recorded, not yet submitted, something
        ahead of it), by id: what `journal list` shows as waiting."""
        rows = self.conn.execute(
            "SELECT q.invocation_id FROM campaign_queue q JOIN invocations i"
            " ON i.id = q.invocation_id WHERE i.state = ? ORDER BY q.seq",
            (JobState.PREPARED,),
        ).fetchall()
        places = {row[0]: self.queue_place(row[0]) for row in rows}
        return {key: place for key, place in places.items() if place and place.ahead}
