"""What the pages show, read in one transaction each: the list, one invocation, the clusters.
The JSON API returns the same objects the CLI's `--json` prints (`journal list`, `journal
show`, `clusters`), built by the same functions, plus what only the pages have (counts,
timelines, log chunks)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
from markupsafe import Markup

from vibesys.journal_schema import ArtifactRow, Attempt, ClusterLease, HistoryRow, Invocation
from vibesys.journal_schema.queue import QueuePlace
from vibesys.journal_schema.store import Journal
from vibesys.journal_schema.views import listed, show_json
from vibesys.states import JobState
from vibesys.ui import diagram, logs, queries, timeline
from vibesys.ui.driver import Driver, driver
from vibesys.ui.fields import Field, recorded, recorded_json
from vibesys.ui.queries import ListFilter, Page, Row


class InvocationView(msgspec.Struct, frozen=True):
    inv: Invocation
    attempts: list[Attempt]
    history: list[HistoryRow]
    artifacts: list[ArtifactRow]
    leases: list[tuple[int, ClusterLease]]
    recorded: list[Field]
    #: the last status round's observation of the current attempt (sight, reason, ...)
    seen: dict[str, Any]
    lanes: list[timeline.Lane]
    #: the attempt whose logs are shown, and their tails
    shown_attempt: int
    tails: list[logs.Chunk]
    json: dict[str, Any]
    #: who drives it, judged against the clock and this host's processes
    driver: Driver
    #: when it was read (the page's times count from here)
    now: datetime

    @property
    def live(self) -> bool:
        return self.inv.state is not JobState.DONE

    @property
    def following(self) -> bool:
        """Whether the shown logs may still grow (the current attempt of an unfinished one)."""
        return self.live and self.shown_attempt == self.inv.attempt

    @property
    def diagram(self) -> Markup:
        taken = [(str(h.from_state), str(h.to_state), h.event) for h in self.history]
        return diagram.svg(self.inv.state, taken)

    @property
    def timeline(self) -> Markup:
        return timeline.svg(self.lanes)


def invocation_view(
    journal: Journal, prefix: str, attempt: int | None, now: datetime
) -> InvocationView:
    inv = queries.find(journal, prefix)
    attempts = journal.invocations.attempts(inv.id)
    history = journal.invocations.history(inv.id)
    numbers = [a.attempt for a in attempts]
    if attempt is not None and attempt not in numbers:
        raise queries.NotFound(f"invocation {inv.id} has no attempt {attempt}")
    shown = attempt if attempt is not None else (numbers[-1] if numbers else 0)
    seen = queries.observation(journal, inv)
    # Before the first attempt: empty ones, which a live page fills once it starts.
    tails = [
        logs.tail(logs.log_path(inv.invocation_dir, shown, s), s)
        if shown
        else logs.Chunk(s, 0, 0, 0, "")
        for s in logs.STREAMS
    ]
    return InvocationView(
        inv=inv,
        attempts=attempts,
        history=history,
        artifacts=journal.progress.artifacts(inv.id),
        leases=journal.clusters.leases_used_by(inv.id),
        recorded=recorded(journal.conn, inv.id),
        seen=seen,
        lanes=timeline.lanes(inv, attempts, history, seen, now),
        shown_attempt=shown,
        tails=tails,
        json=show_json(journal, inv),
        driver=driver(inv, now),
        now=now,
    )


def invocation_json(view: InvocationView) -> dict[str, Any]:
    """`journal show --json`'s object, exactly."""
    return view.json


def extra_json(view: InvocationView) -> dict[str, Any]:
    """What the invocation's page shows beyond `journal show --json`."""
    return {
        "id": view.inv.id,
        "recorded": recorded_json(view.recorded),
        "observation": view.seen,
        "driver": view.driver.to_json(),
        "now": view.now.isoformat(),
        "timeline": [lane.to_json() for lane in view.lanes],
        "logs": {
            "attempt": view.shown_attempt,
            "following": view.following,
            "tails": [c.to_json() for c in view.tails],
        },
    }


def list_json(journal: Journal, page: Page) -> dict[str, Any]:
    """The page's invocations as `journal list --json` prints them, with the counts and the
    cursors of the pages around it."""
    return {
        "invocations": [listed(row.inv, journal, row.waiting) for row in page.rows],
        "counts": page.counts,
        "total": page.total,
        "newer": page.newer,
        "older": page.older,
    }


class ClustersView(msgspec.Struct, frozen=True):
    leases: list[tuple[ClusterLease, list[tuple[str, int]]]]
    broker_active: list[Row]
    broker_done: list[Row]
    #: the evaluations waiting in their campaign's queue (one at a time per campaign), in order
    waiting: list[tuple[Invocation, QueuePlace]] = msgspec.field(default_factory=list)


def clusters_view(journal: Journal) -> ClustersView:
    leases = [
        (lease, journal.clusters.lease_users(lease.id))
        for lease in journal.clusters.cluster_leases()
    ]
    active, done = queries.broker_jobs(journal)
    waiting = [
        (journal.invocations.get(key), place) for key, place in journal.queue.waiting().items()
    ]
    return ClustersView(leases, active, done, waiting)


def queue_json(view: ClustersView) -> dict[str, Any]:
    """The campaigns' queues: who waits, in order, and for whom."""
    waiting = [
        {
            "invocation": inv.id,
            "label": inv.label,
            "campaign": place.campaign,
            "position": place.position,
            "ahead": list(place.ahead),
        }
        for inv, place in view.waiting
    ]
    return {"waiting": waiting, "count": len(waiting)}


def clusters_json(view: ClustersView) -> dict[str, Any]:
    """What `vibesys clusters --json` prints, each lease with the attempts that ran on it."""
    leases = [
        {**lease.to_json(), "uses": [{"invocation": i, "attempt": a} for i, a in uses]}
        for lease, uses in view.leases
    ]
    return {"clusters": leases, "count": len(leases)}


def broker_json(journal: Journal, view: ClustersView) -> dict[str, Any]:
    def objects(rows: list[Row]) -> list[dict[str, Any]]:
        return [
            {**r.inv.to_json(journal.invocations.attempts(r.inv.id), []), "observation": r.seen}
            for r in rows
        ]

    return {"active": objects(view.broker_active), "finished": objects(view.broker_done)}


def page_of(journal: Journal, flt: ListFilter) -> Page:
    return queries.list_page(journal, flt)
