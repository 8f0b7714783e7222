"""The rows of the cluster lease table (see `clusters.py` for how a lease moves): the read
model, and the helpers every write of ClusterStore goes through (one evidence note per step,
the lease table's check of every step, `vibesys/states/lease_table.py`)."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta
from typing import Any

from msgspec import Struct

from vibesys.errors import StaleState, UsageError
from vibesys.journal_schema.clock import iso, iso_or_none, moment, moment_or_none
from vibesys.states.lease_table import LIVE_LEASE_STATES, LeaseState, lease_next, lease_sources

__all__ = ["LIVE_LEASE_STATES", "ClusterLease", "LeaseState"]


#: How long a launch or release may take before another host may take it over.
EFFECT_TTL = timedelta(hours=1)

COLUMNS = (
    "id, name, campaign, fingerprint, profile, adapter, request, state, allocation_job, owner, "
    "owner_expires_at, intended_at, launched_at, release_intended_at, released_at, updated_at, "
    "evidence, site_digest"
)


class ClusterLease(Struct, frozen=True):
    id: int
    name: str
    campaign: str | None
    fingerprint: str
    profile: str
    adapter: str
    #: the adapter request that launched or adopted it (enough to inspect or release it)
    request: dict[str, Any]
    state: LeaseState
    allocation_job: str | None
    owner: str | None
    owner_expires_at: datetime | None
    intended_at: datetime
    launched_at: datetime | None
    release_intended_at: datetime | None
    released_at: datetime | None
    updated_at: datetime
    #: every step: {"at", "state", "text"}
    evidence: list[dict[str, str]]
    #: (m007) the site configuration (the profile's rendering) it was launched or adopted with
    site_digest: str | None = None

    @property
    def live(self) -> bool:
        return self.state in LIVE_LEASE_STATES

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "campaign": self.campaign,
            "fingerprint": self.fingerprint,
            "profile": self.profile,
            "adapter": self.adapter,
            "state": self.state,
            "allocation_job": self.allocation_job,
            "owner": self.owner,
            "intended_at": iso(self.intended_at),
            "launched_at": iso_or_none(self.launched_at),
            "release_intended_at": iso_or_none(self.release_intended_at),
            "released_at": iso_or_none(self.released_at),
            "updated_at": iso(self.updated_at),
            "evidence": self.evidence,
            "site_digest": self.site_digest,
        }


def lease_row(row: tuple[Any, ...]) -> ClusterLease:
    values = list(row)
    values[6] = json.loads(values[6])
    values[7] = LeaseState(values[7])
    for i in (10, 12, 13, 14):  # owner_expires_at, launched_at, release_intended_at, released_at
        values[i] = moment_or_none(values[i])
    values[11] = moment(values[11])  # intended_at
    values[15] = moment(values[15])  # updated_at
    values[16] = json.loads(values[16])
    return ClusterLease(*values)


def expiry(now: datetime) -> datetime:
    return now + EFFECT_TTL


def note(at: datetime, state: LeaseState, text: str) -> dict[str, str]:
    return {"at": iso(at), "state": str(state), "text": " ".join(text.split())[:2000]}


def _stored(value: object) -> object:
    """A column's value as the table holds it: times as ISO text (`clock.iso`)."""
    return iso(value) if isinstance(value, datetime) else value


def get_lease(conn: sqlite3.Connection, lease_id: int) -> ClusterLease:
    row = conn.execute(f"SELECT {COLUMNS} FROM cluster_leases WHERE id=?", (lease_id,)).fetchone()
    if row is None:
        raise UsageError(f"unknown cluster lease {lease_id}")
    return lease_row(row)


def live_lease(conn: sqlite3.Connection, name: str) -> ClusterLease | None:
    marks = ",".join("?" * len(LIVE_LEASE_STATES))
    row = conn.execute(
        f"SELECT {COLUMNS} FROM cluster_leases WHERE name=? AND state IN ({marks})",
        (name, *LIVE_LEASE_STATES),
    ).fetchone()
    return lease_row(row) if row is not None else None


def unfinished_users(
    conn: sqlite3.Connection,
    *,
    lease_id: int | None = None,
    campaign: tuple[str, str] | None = None,
) -> list[str]:
    """The invocations not DONE that ran on a lease (`lease_id`), or on any lease of a
    campaign (`(adapter, campaign)`): their jobs may still run there."""
    params: tuple[object, ...]
    if lease_id is not None:
        where, params = "l.id=?", (lease_id,)
    else:
        assert campaign is not None
        where, params = "l.adapter=? AND l.campaign=?", campaign
    rows = conn.execute(
        "SELECT DISTINCT u.invocation_id FROM cluster_lease_uses u "
        "JOIN cluster_leases l ON l.id=u.lease_id JOIN invocations i ON i.id=u.invocation_id "
        f"WHERE {where} AND i.state != 'DONE' ORDER BY u.invocation_id",
        params,
    ).fetchall()
    return [str(r[0]) for r in rows]


def step(lease: ClusterLease, trigger: str) -> LeaseState:
    """The state `trigger` moves `lease` to, by the lease table; StaleState when the table
    has no such row for the state the lease is in (someone moved it first)."""
    after = lease_next(lease.state, trigger)
    if after is None:
        raise StaleState(
            f"cluster lease {lease.id} ({lease.name}) is {lease.state}, not "
            + " or ".join(str(s) for s in lease_sources(trigger))
        )
    return after


def insert(conn: sqlite3.Connection, **columns: str | datetime | None) -> ClusterLease:
    """A new row of `columns` (the request and evidence already JSON), read back."""
    marks = ",".join("?" * len(columns))
    cursor = conn.execute(
        f"INSERT INTO cluster_leases ({', '.join(columns)}) VALUES ({marks})",
        [_stored(value) for value in columns.values()],
    )
    return get_lease(conn, int(cursor.lastrowid or 0))


def move(
    conn: sqlite3.Connection,
    lease: ClusterLease,
    state: LeaseState,
    at: datetime,
    text: str,
    **columns: str | datetime | None,
) -> None:
    evidence = [*lease.evidence, note(at, state, text)]
    sets = "".join(f", {name}=?" for name in columns)
    conn.execute(
        f"UPDATE cluster_leases SET state=?, updated_at=?, evidence=?{sets} WHERE id=?",
        (state, iso(at), json.dumps(evidence), *map(_stored, columns.values()), lease.id),
    )
