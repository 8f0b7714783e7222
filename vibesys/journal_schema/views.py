"""An invocation as the JSON of `journal show --json`, `journal list --json` and the web
view's API: one shape, read from the journal, shared by the CLI and the web view."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vibesys.journal_schema.queue import QueuePlace
    from vibesys.journal_schema.records import Invocation
    from vibesys.journal_schema.store import Journal

__all__ = ["listed", "place_json", "show_json"]


def show_json(journal: Journal, inv: Invocation) -> dict[str, Any]:
    """One invocation as `journal show --json` shows it: its record, attempts, history,
    artifacts, the clusters it used, its place in its campaign's queue."""
    shown = inv.to_json(journal.invocations.attempts(inv.id), journal.invocations.history(inv.id))
    shown["artifacts"] = [a.to_json() for a in journal.progress.artifacts(inv.id)]
    shown["clusters"] = [
        {"attempt": attempt, **lease.to_json()}
        for attempt, lease in journal.clusters.leases_used_by(inv.id)
    ]
    place = journal.queue.queue_place(inv.id)
    shown["queue"] = None if place is None else place_json(place)
    return shown


def listed(inv: Invocation, store: Journal, place: QueuePlace | None) -> dict[str, Any]:
    """One invocation as `journal list --json` (and the web view's API) shows it."""
    shown = inv.to_json(store.invocations.attempts(inv.id), [])
    shown["waiting"] = None if place is None else place_json(place)
    return shown


def place_json(place: QueuePlace) -> dict[str, Any]:
    return {"campaign": place.campaign, "position": place.position, "ahead": list(place.ahead)}
