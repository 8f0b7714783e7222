"""The recorded results of effects and observations that are not transitions: the claim a
fence read, the outage an observation dates, where an attempt runs. With `core.py` the only
engine code that writes the journal (tests/engine/test_one_door.py); what to record is decided
elsewhere (`outage.py`, `provenance.py`), purely."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from vibesys.engine.facts import ClaimRead
from vibesys.engine.outage import OutageWrite, dated, outage_write
from vibesys.engine.provenance import ProvenanceKeeper, provenance_change
from vibesys.engine.seen import Seen, Sight
from vibesys.journal_schema import Invocation, Journal

__all__ = ["date_outage", "record_claim", "record_provenance"]


def record_claim(journal: Journal, inv: Invocation, read: ClaimRead) -> None:
    """Keep the claim the fence read with the current attempt."""
    journal.invocations.record_attempt_detail(inv.id, inv.attempt, claim=read.claim)


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


def record_provenance(
    engine: ProvenanceKeeper, inv: Invocation, provenance: Mapping[str, str]
) -> None:
    """Merge `provenance` into the current attempt's record when it adds or changes a value
    (the start, then the end, ...); silent otherwise."""
    fresh = provenance_change(engine, inv, provenance)
    if fresh is not None:
        engine.journal.invocations.record_attempt_detail(inv.id, inv.attempt, provenance=fresh)
        key = (inv.id, inv.attempt)
        engine.provenance_seen[key] = {**engine.provenance_seen.get(key, {}), **fresh}
