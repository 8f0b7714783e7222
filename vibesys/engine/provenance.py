"""Where and on what each attempt ran, for every adapter: the adapters put it in every status
(`RemoteStatus.provenance`: a Slurm site, partition, nodes and TRES with the start and end the
scheduler reports; a SkyPilot cluster, its allocation and profile), and this is the one place
that records it with the attempt, when an observation shows something new."""

from __future__ import annotations

from typing import Protocol

from vibesys.adapters.base import RemoteStatus
from vibesys.journal_schema import Invocation, Journal


class ProvenanceKeeper(Protocol):
    """Where provenance is recorded, and what this process already recorded (the engine)."""

    journal: Journal
    #: (invocation, attempt) -> the provenance recorded for it, as far as this process knows
    provenance_seen: dict[tuple[str, int], dict[str, str]]


def record_provenance(engine: ProvenanceKeeper, inv: Invocation, status: RemoteStatus) -> None:
    """Merge the status's provenance into the current attempt's record when it adds or
    changes a value (the start, then the end, ...); silent otherwise."""
    if not status.provenance or inv.attempt < 1:
        return
    key = (inv.id, inv.attempt)
    known = engine.provenance_seen.get(key)
    if known is None:
        recorded = [a for a in engine.journal.attempts(inv.id) if a.attempt == inv.attempt]
        known = {k: str(v) for k, v in recorded[0].provenance.items()} if recorded else {}
    fresh = dict(status.provenance)
    if any(known.get(name) != value for name, value in fresh.items()):
        engine.journal.record_attempt_detail(inv.id, inv.attempt, provenance=fresh)
        known = {**known, **fresh}
    engine.provenance_seen[key] = known
