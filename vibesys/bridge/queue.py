"""The campaign's queue position of an evaluation: what the `queued` reply says.

Every evaluation of a campaign, from any of its sessions (they share the campaign's journal),
joins the campaign's queue when it is recorded (`vibesys.journal_schema.queue`); the planner
submits it once nothing that joined before it is still open. The position is how many are
ahead (0: its turn).
"""

from __future__ import annotations

from vibesys.journal_schema import Journal

__all__ = ["queue_position"]


def queue_position(journal: Journal, invocation_id: str) -> int:
    place = journal.queue.queue_place(invocation_id)
    return 0 if place is None else place.position
