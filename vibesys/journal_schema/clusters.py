"""Cluster leases: the allocations vibesys holds itself (a campaign's SkyPilot cluster),
recorded like any other effect, the intent first.

A lease moves only along the rows of the lease table (`vibesys/states/lease_table.py`, drawn
in docs/architecture.md): every write names its trigger, and `step` checks it against the
state the row is in. `launching` and `releasing` are intents: their `owner` (the live process
carrying it out) is left alone until it is provably dead; then `reconcile` settles the row
from what the control plane shows. There is at most one live row (launching, up or releasing)
per cluster name; a launch that finds one continues it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from vibesys.errors import StaleState, UsageError
from vibesys.journal_schema.clock import iso, utc_now
from vibesys.journal_schema.cluster_rows import (
    COLUMNS,
    LIVE_LEASE_STATES,
    ClusterLease,
    LeaseState,
    expiry,
    get_lease,
    insert,
    lease_row,
    live_lease,
    move,
    note,
    step,
    unfinished_users,
)
from vibesys.journal_schema.journal_file import JournalFile
from vibesys.journal_schema.leases import lease_free

__all__ = ["LIVE_LEASE_STATES", "ClusterLease", "ClusterStore", "LeaseState"]


class ClusterStore:
    """Cluster lease of the journal. Each method is one write transaction."""

    def __init__(self, file: JournalFile) -> None:
        self.conn = file.conn
        self.write_txn = file.write_txn

    # -- reads ----------------------------------------------------------------------------------

    def cluster_lease(self, lease_id: int) -> ClusterLease:
        return get_lease(self.conn, lease_id)

    def cluster_leases(
        self, states: Sequence[LeaseState] | None = None, name: str | None = None
    ) -> list[ClusterLease]:
        where, params = ["1=1"], []
        if states is not None:
            where.append(f"state IN ({','.join('?' * len(states))})")
            params += [str(s) for s in states]
        if name is not None:
            where.append("name=?")
            params.append(name)
        rows = self.conn.execute(
            f"SELECT {COLUMNS} FROM cluster_leases WHERE {' AND '.join(where)} ORDER BY id",
            params,
        ).fetchall()
        return [lease_row(row) for row in rows]

    def live_lease(self, name: str) -> ClusterLease | None:
        return live_lease(self.conn, name)

    def unfinished_users(
        self, *, lease_id: int | None = None, campaign: tuple[str, str] | None = None
    ) -> list[str]:
        """See `cluster_rows.unfinished_users`."""
        return unfinished_users(self.conn, lease_id=lease_id, campaign=campaign)

    def leases_used_by(self, invocation_id: str) -> list[tuple[int, ClusterLease]]:
        """(attempt, lease) for every attempt of the invocation that ran on a leased cluster."""
        rows = self.conn.execute(
            "SELECT attempt, lease_id FROM cluster_lease_uses WHERE invocation_id=? "
            "ORDER BY attempt, lease_id",
            (invocation_id,),
        ).fetchall()
        return [(attempt, self.cluster_lease(lease_id)) for attempt, lease_id in rows]

    def lease_users(self, lease_id: int) -> list[tuple[str, int]]:
        """(invocation, attempt) of every attempt that ran on the lease."""
        rows = self.conn.execute(
            "SELECT invocation_id, attempt FROM cluster_lease_uses WHERE lease_id=? "
            "ORDER BY at, invocation_id",
            (lease_id,),
        ).fetchall()
        return [(str(i), int(a)) for i, a in rows]

    # -- the launch -----------------------------------------------------------------------------

    def intend_launch(
        self,
        *,
        name: str,
        campaign: str,
        fingerprint: str,
        profile: str,
        adapter: str,
        request: dict[str, Any],
        reason: str,
        owner: str,
        now: datetime | None = None,
        site_digest: str | None = None,
    ) -> ClusterLease:
        """Commit the intent to launch `name` (before `sky launch`). A live row is continued
        when it is a launch; an `up` one is recorded lost (a refresh found no cluster, which is
        why a launch is needed) and a `releasing` one released, then a new row starts."""
        at = now or utc_now()
        with self.write_txn() as conn:
            live = live_lease(conn, name)
            if (
                live is not None
                and live.state in (LeaseState.LAUNCHING, LeaseState.RELEASING)
                and not lease_free(live.owner, live.owner_expires_at, owner, at)
            ):
                raise StaleState(
                    f"cluster {name} is {live.state} by live {live.owner} (lease {live.id})"
                )
            if live is not None and live.state is LeaseState.LAUNCHING:
                move(
                    conn,
                    live,
                    step(live, "LaunchIntended"),
                    at,
                    f"launch intended again: {reason}",
                    owner=owner,
                    owner_expires_at=expiry(at),
                )
                return get_lease(conn, live.id)
            if live is not None:
                ended = step(live, "Lost" if live.state is LeaseState.UP else "Released")
                column = "released_at" if ended is LeaseState.RELEASED else "updated_at"
                move(conn, live, ended, at, f"gone on refresh: {reason}", **{column: at})
            return _new_lease(
                conn,
                (name, campaign, fingerprint, profile, adapter, request, site_digest),
                at,
                note(at, LeaseState.LAUNCHING, f"launch intended: {reason}"),
                state=LeaseState.LAUNCHING,
                owner=owner,
                owner_expires_at=expiry(at),
            )

    def record_launched(
        self, lease_id: int, allocation: Sequence[str], evidence: str, now: datetime | None = None
    ) -> ClusterLease:
        """The launch left a cluster up on `allocation` (also: a launch found completed)."""
        at = now or utc_now()
        with self.write_txn() as conn:
            lease = get_lease(conn, lease_id)
            move(
                conn,
                lease,
                step(lease, "Launched"),
                at,
                evidence,
                allocation_job=",".join(allocation),
                launched_at=lease.launched_at or at,
                owner=None,
                owner_expires_at=None,
            )
            return get_lease(conn, lease_id)

    def record_launch_failed(
        self, lease_id: int, evidence: str, now: datetime | None = None
    ) -> ClusterLease:
        """Proven: the launch left no cluster."""
        at = now or utc_now()
        with self.write_txn() as conn:
            lease = get_lease(conn, lease_id)
            failed = step(lease, "LaunchFailed")
            move(conn, lease, failed, at, evidence, owner=None, owner_expires_at=None)
            return get_lease(conn, lease_id)

    def record_reuse(
        self,
        *,
        name: str,
        campaign: str,
        fingerprint: str,
        profile: str,
        adapter: str,
        request: dict[str, Any],
        allocation: Sequence[str],
        evidence: str,
        now: datetime | None = None,
        site_digest: str | None = None,
    ) -> ClusterLease:
        """A refresh found `name` up on `allocation`: the live row, brought up to date. A
        cluster nobody recorded (launched by another journal, or by hand) is adopted; one that
        now runs on another allocation than recorded was relaunched: the old row is lost."""
        at = now or utc_now()
        joined = ",".join(allocation)
        with self.write_txn() as conn:
            live = live_lease(conn, name)
            if live is not None and live.state is LeaseState.RELEASING:
                return live
            if live is not None and live.state is LeaseState.LAUNCHING:
                move(
                    conn,
                    live,
                    step(live, "FoundUp"),
                    at,
                    f"found up: {evidence}",
                    allocation_job=joined,
                    launched_at=at,
                    owner=None,
                    owner_expires_at=None,
                )
                return get_lease(conn, live.id)
            if live is not None and live.allocation_job in (joined, None, ""):
                if not live.allocation_job and joined:
                    move(conn, live, step(live, "FoundUp"), at, evidence, allocation_job=joined)
                return get_lease(conn, live.id)
            if live is not None:
                move(
                    conn,
                    live,
                    step(live, "Lost"),
                    at,
                    f"now on allocation {joined}, not {live.allocation_job}",
                )
            return _new_lease(
                conn,
                (name, campaign, fingerprint, profile, adapter, request, site_digest),
                at,
                note(at, LeaseState.UP, f"adopted, found up: {evidence}"),
                state=LeaseState.UP,
                allocation_job=joined,
                launched_at=at,
            )

    def record_lease_use(
        self, lease_id: int, invocation_id: str, attempt: int, now: datetime | None = None
    ) -> None:
        with self.write_txn() as conn:
            # In the same transaction as the check: a release intended meanwhile wins, and
            # this attempt is not submitted onto a cluster on its way down.
            step(get_lease(conn, lease_id), "Used")
            conn.execute(
                "INSERT OR IGNORE INTO cluster_lease_uses (lease_id, invocation_id, attempt, at) "
                "VALUES (?,?,?,?)",
                (lease_id, invocation_id, attempt, iso(now or utc_now())),
            )

    def note_lease(self, lease_id: int, text: str, now: datetime | None = None) -> ClusterLease:
        """Add evidence without moving the lease (a failed effect, a settlement that waits)."""
        at = now or utc_now()
        with self.write_txn() as conn:
            lease = get_lease(conn, lease_id)
            move(conn, lease, lease.state, at, text)
            return get_lease(conn, lease_id)

    # -- the release ----------------------------------------------------------------------------

    def intend_release(
        self, lease_id: int, owner: str, reason: str, now: datetime | None = None
    ) -> ClusterLease:
        """Commit the intent to release (before `sky down`); a release intended again (the
        earlier one was interrupted) is continued."""
        at = now or utc_now()
        with self.write_txn() as conn:
            lease = get_lease(conn, lease_id)
            releasing = step(lease, "ReleaseIntended")
            busy = unfinished_users(conn, lease_id=lease_id)
            if busy:  # checked with the write lock held: no attempt joins it meanwhile
                raise UsageError(
                    f"cluster {lease.name} still serves invocation(s) {', '.join(busy)}: wait "
                    "for them, or cancel them, first"
                )
            move(
                conn,
                lease,
                releasing,
                at,
                f"release intended: {reason}",
                release_intended_at=lease.release_intended_at or at,
                owner=owner,
                owner_expires_at=expiry(at),
            )
            return get_lease(conn, lease_id)

    def record_released(
        self, lease_id: int, evidence: str, now: datetime | None = None
    ) -> ClusterLease:
        at = now or utc_now()
        with self.write_txn() as conn:
            lease = get_lease(conn, lease_id)
            move(
                conn,
                lease,
                step(lease, "Released"),
                at,
                evidence,
                released_at=at,
                owner=None,
                owner_expires_at=None,
            )
            return get_lease(conn, lease_id)

    def unsettled_leases(self, owner: str, now: datetime | None = None) -> list[ClusterLease]:
        """Launches and releases whose outcome is not recorded and whose owner is gone (or is
        `owner`): what `reconcile` settles."""
        moment = now or utc_now()
        return [
            lease
            for lease in self.cluster_leases((LeaseState.LAUNCHING, LeaseState.RELEASING))
            if lease_free(lease.owner, lease.owner_expires_at, owner, moment)
        ]


def _new_lease(
    conn: sqlite3.Connection,
    identity: tuple[str, str | None, str, str, str, dict[str, Any], str | None],
    at: datetime,
    first: dict[str, str],
    **columns: Any,
) -> ClusterLease:
    """A new lease row: who it is (name, campaign, fingerprint, profile, adapter, request, site
    digest), intended at `at`, its first note, and the columns of the state it starts in."""
    name, campaign, fingerprint, profile, adapter, request, site_digest = identity
    return insert(
        conn,
        name=name,
        campaign=campaign,
        fingerprint=fingerprint,
        profile=profile,
        adapter=adapter,
        request=json.dumps(request, sort_keys=True),
        intended_at=at,
        updated_at=at,
        evidence=json.dumps([first]),
        site_digest=site_digest,
        **columns,
    )
