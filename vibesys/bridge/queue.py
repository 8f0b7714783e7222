"""The campaign's queue position of an evaluation: the one function the `queued` reply reads.

One remote evaluation at a time per campaign, with the others waiting in order across every
session of the campaign, is the campaign queue's work (engine side, still to come). Until it
lands the bridge holds nothing back, and this reports what the journal says: how many of the
campaign's evaluations recorded before this one have not ended (0: nothing is ahead). The
queue replaces this body; the reply, and every caller, stay as they are.
"""

from __future__ import annotations

from vibesys.journal_schema import Journal
from vibesys.states import JobState

__all__ = ["queue_position"]


def queue_position(journal: Journal, run_id: str, invocation_id: str) -> int:
    ahead = 0
    for row in journal.campaign_requests(run_id):
        if row.invocation_id == invocation_id:
            return ahead
        found = journal.conn.execute(
            "SELECT state FROM invocations WHERE id=?", (row.invocation_id,)
        ).fetchone()
        if found is not None and found[0] != JobState.DONE:
            ahead += 1
    return ahead
