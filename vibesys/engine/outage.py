"""How long a scheduler has been unreachable, as the journal knows it.

The unreachable timeout recorded with an invocation counts from the first unreachable
observation of its current attempt recorded in the journal (`attempts.unreachable_since`),
whichever process made it: repeated `reconcile` runs, a `wait`, a takeover all count from the
same moment, so none gives up before the time is spent and none waits longer. Any observation
that reaches the scheduler ends the outage; the next one counts afresh.
"""

from __future__ import annotations

from datetime import datetime

from msgspec import structs

from vibesys.engine.seen import Seen, Sight
from vibesys.journal_schema import Invocation, Journal


def date_outage(journal: Journal, now: datetime, inv: Invocation, seen: Seen) -> Seen:
    """`seen`, an UNREACHABLE one dated from the outage's first recorded observation (recorded
    now when this is the first); any other observation clears the record."""
    recorded = journal.invocations.unreachable_since(inv.id, inv.attempt)
    if seen.sight is not Sight.UNREACHABLE:
        if recorded is not None:
            journal.invocations.clear_unreachable(inv.id, inv.attempt)
        return seen
    if recorded is None:
        recorded = journal.invocations.mark_unreachable(inv.id, inv.attempt, seen.since or now)
    return structs.replace(seen, since=min(recorded, seen.since or recorded))
