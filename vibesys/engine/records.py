"""The recorded results of observations that are not transitions: the outage an observation
dates, where an attempt runs. What to record is decided elsewhere (`outage.py`,
`provenance.py`); `tests/engine/test_one_door.py` lists the engine's other journal writes."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from vibesys.engine.outage import OutageWrite, dated, outage_write
from vibesys.engine.provenance import provenance_change
from vibesys.engine.seen import Seen, Sight
from vibesys.journal_schema import Invocation, Journal

if TYPE_CHECKING:
    from vibesys.engine.core import Engine


def date_outage(journal: Journal, now: datetime, inv: Invocation, seen: Seen) -> Seen:
    """`seen`, an UNREACHABLE one dated from the outage's first recorded observation (recorded
    now when this is the first); any other observation clears the record."""
    records = journal.invocations
    recorded = records.unreachable_since(inv.id, inv.attempt)
    match outage_write(recorded, seen):
        case OutageWrite.CLEAR:
            records.clear_unreachable(inv.id, inv.attempt)
        case OutageWrite.MARK:
            recorded = records.mark_unreachable(inv.id, inv.attempt, seen.since or now)
    return dated(seen, recorded) if seen.sight is Sight.UNREACHABLE and recorded else seen


def record_provenance(engine: Engine, inv: Invocation, provenance: Mapping[str, str]) -> None:
    """Merge `provenance` into the current attempt's record when it adds or changes a value
    (the start, then the end, ...); silent otherwise."""
    fresh = provenance_change(engine, inv, provenance)
    if fresh is not None:
        engine.journal.invocations.record_attempt_detail(inv.id, inv.attempt, provenance=fresh)
        key = (inv.id, inv.attempt)
        engine.provenance_seen[key] = {**engine.provenance_seen.get(key, {}), **fresh}


# -- an invocation's owner lease: who drives it now -------------------------------------------


# -- a collection's progress, recorded as it goes so that a restart resumes it ---------------


# -- the status round shared per site: its watch list, poller lease and schedule -------------


# -- a cluster lease's own transitions, around the effects they authorize ---------------------
