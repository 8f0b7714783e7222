"""Where and on what each attempt ran, for every adapter: the adapters put it in every status
(`RemoteStatus.provenance`: a Slurm site, partition, nodes and TRES with the start and end the
scheduler reports; a SkyPilot cluster, its allocation and profile), and this is the one place
that decides what of it is new; the engine records that with the attempt."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from vibesys.journal_schema import Invocation

if TYPE_CHECKING:
    from vibesys.engine.core import Engine


def known_provenance(engine: Engine, inv: Invocation) -> dict[str, str]:
    """The current attempt's provenance as recorded (read once per process and attempt)."""
    key = (inv.id, inv.attempt)
    known = engine.provenance_seen.get(key)
    if known is None:
        recorded = [
            a for a in engine.journal.invocations.attempts(inv.id) if a.attempt == inv.attempt
        ]
        known = {k: str(v) for k, v in recorded[0].provenance.items()} if recorded else {}
        engine.provenance_seen[key] = known
    return known


def provenance_change(
    engine: Engine, inv: Invocation, provenance: Mapping[str, str]
) -> dict[str, str] | None:
    """`provenance`, when it adds or changes a value of the current attempt's record (the
    engine records it); None when there is nothing to record."""
    if inv.attempt < 1:
        return None
    known = known_provenance(engine, inv)
    fresh = dict(provenance)
    if any(known.get(name) != value for name, value in fresh.items()):
        return fresh
    return None
