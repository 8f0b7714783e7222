"""One owner at a time: a live `vibesys` process holds a lease (host:pid:start, expiry) on each
invocation it drives; others leave it alone until it expires or its holder is provably dead."""

from __future__ import annotations

from datetime import datetime, timedelta

from vibesys.errors import UsageError
from vibesys.journal_schema.clock import iso, utc_now
from vibesys.journal_schema.clock import moment_or_none as _at
from vibesys.journal_schema.journal_file import JournalFile
from vibesys.osutil.proc import identity_alive


def lease_free(holder: str | None, expires: datetime | None, owner: str, now: datetime) -> bool:
    """Whether `owner` may take the lease: free, its own, its holder provably dead, or expired
    while its holder's liveness cannot be checked (another host).

    A holder on this host that provably lives keeps its lease even past expiry: it may be
    blocked in a slow submit, and taking over then could submit the same attempt twice."""
    if holder is None or holder == owner:
        return True
    alive = identity_alive(holder)
    if alive is not None:
        return not alive
    return expires is None or expires <= now


class LeaseStore:
    """Lease of the journal."""

    def __init__(self, file: JournalFile) -> None:
        self.conn = file.conn
        self.write_txn = file.write_txn

    def acquire_lease(
        self, invocation_id: str, owner: str, ttl: timedelta, *, now: datetime | None = None
    ) -> bool:
        """Take (or renew) the lease unless another live owner holds an unexpired one."""
        moment = now or utc_now()
        with self.write_txn() as conn:
            row = conn.execute(
                "SELECT lease_owner, lease_expires_at FROM invocations WHERE id=?",
                (invocation_id,),
            ).fetchone()
            if row is None:
                raise UsageError(f"unknown invocation {invocation_id}")
            if not lease_free(row[0], _at(row[1]), owner, moment):
                return False
            conn.execute(
                "UPDATE invocations SET lease_owner=?, lease_expires_at=? WHERE id=?",
                (owner, iso(moment + ttl), invocation_id),
            )
        return True

    def release_lease(self, invocation_id: str, owner: str) -> None:
        self.release_leases([invocation_id], owner)

    def acquire_leases(
        self,
        invocation_ids: list[str],
        owner: str,
        ttl: timedelta,
        *,
        now: datetime | None = None,
    ) -> set[str]:
        """Take every lease that is free, in one transaction (one fsync for a whole reconcile
        round); return the ids taken."""
        moment = now or utc_now()
        taken: set[str] = set()
        with self.write_txn() as conn:
            for start in range(0, len(invocation_ids), 500):
                chunk = invocation_ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT id, lease_owner, lease_expires_at FROM invocations "
                    f"WHERE id IN ({marks})",
                    chunk,
                ).fetchall()
                free = (i for i, holder, exp in rows if lease_free(holder, _at(exp), owner, moment))
                taken.update(free)
            conn.executemany(
                "UPDATE invocations SET lease_owner=?, lease_expires_at=? WHERE id=?",
                [(owner, iso(moment + ttl), i) for i in sorted(taken)],
            )
        return taken

    def release_leases(self, invocation_ids: list[str], owner: str) -> None:
        with self.write_txn() as conn:
            conn.executemany(
                "UPDATE invocations SET lease_owner=NULL, lease_expires_at=NULL "
                "WHERE id=? AND lease_owner=?",
                [(i, owner) for i in invocation_ids],
            )
