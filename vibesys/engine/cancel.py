"""`vibesys cancel`: commit the intent, send the cancel, wait until it has settled."""

from __future__ import annotations

from vibesys.engine.core import Engine
from vibesys.engine.drive import DriveOptions, wait_for
from vibesys.engine.observe import describe
from vibesys.errors import BackendError
from vibesys.journal_schema import Invocation
from vibesys.states import JobState


def cancel_invocation(engine: Engine, invocation_id: str) -> Invocation:
    inv = engine.journal.get(invocation_id)
    if inv.state is JobState.DONE:
        return inv
    inv = engine.request_cancel(inv, "vibesys cancel")
    engine.send_cancel(inv)
    if inv.state is JobState.UNRESOLVED:
        if not engine.journal.acquire_lease(inv.id, engine.owner, engine.lease_ttl):
            return wait_for(engine, inv.id, DriveOptions())
        try:
            inv = engine.advance(engine.journal.get(inv.id))
            if inv.state is JobState.UNRESOLVED:
                seen = engine.observe(inv)
                text = seen.evidence if isinstance(seen, BackendError) else describe(seen)
                inv = engine.abandon_unresolved(inv, text)
        finally:
            engine.journal.release_lease(inv.id, engine.owner)
        if inv.state is not JobState.UNRESOLVED:
            return (
                wait_for(engine, inv.id, DriveOptions()) if inv.state is not JobState.DONE else inv
            )
    return wait_for(engine, inv.id, DriveOptions())
