"""How long a scheduler has been unreachable, as the journal knows it.

The unreachable timeout recorded with an invocation counts from the first unreachable
observation of its current attempt recorded in the journal (`attempts.unreachable_since`),
whichever process made it: repeated `reconcile` runs, a `wait`, a takeover all count from the
same moment, so none gives up before the time is spent and none waits longer. Any observation
that reaches the scheduler ends the outage; the next one counts afresh.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from msgspec import structs

from vibesys.engine.seen import Seen, Sight

__all__ = ["OutageWrite", "dated", "outage_write"]


class OutageWrite(StrEnum):
    """What an observation changes in the attempt's outage record."""

    MARK = "mark"  # the first unreachable observation: the outage begins now
    CLEAR = "clear"  # the scheduler answered: the outage is over


def outage_write(recorded: datetime | None, seen: Seen) -> OutageWrite | None:
    """What to record of `seen`, given the outage recorded so far (None: nothing)."""
    if seen.sight is not Sight.UNREACHABLE:
        if recorded is not None:
            return OutageWrite.CLEAR
        return None
    return OutageWrite.MARK if recorded is None else None


def dated(seen: Seen, recorded: datetime) -> Seen:
    """An UNREACHABLE `seen`, dated from the outage's first recorded observation."""
    return structs.replace(seen, since=min(recorded, seen.since or recorded))
