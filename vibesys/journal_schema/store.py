"""The journal: one SQLite file, WAL with synchronous=FULL, one writer at a time.

Every transition is one `BEGIN IMMEDIATE` transaction that compare-and-swaps the invocation's
(state, version), appends to the append-only history with the event's evidence, and updates
the current row. The engine performs the effect a transition authorizes only after
`commit_transition` has returned.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vibesys.errors import JournalFault, StaleState
from vibesys.journal_schema.bridge_requests import BridgeRecords
from vibesys.journal_schema.clock import iso, moment, now_iso, utc_now
from vibesys.journal_schema.clusters import ClusterRecords
from vibesys.journal_schema.codec import encode_event
from vibesys.journal_schema.creation import file_identity, rescue, rollback
from vibesys.journal_schema.leases import LeaseRecords
from vibesys.journal_schema.opening import (
    BUSY_TIMEOUT_MS,
    DEFAULT_PATH,
    NETWORK_FS,
    filesystem_type,
    journal_error,
    journal_path,
    open_database,
)
from vibesys.journal_schema.polls import PollRecords
from vibesys.journal_schema.progress import ProgressRecords
from vibesys.journal_schema.queue import QueueRecords, join_queue
from vibesys.journal_schema.reads import InvocationReads
from vibesys.journal_schema.records import Invocation
from vibesys.journal_schema.rows import changes
from vibesys.journal_schema.settings import Settings
from vibesys.journal_schema.sites import Rendering, SiteRecords, insert_site
from vibesys.journal_schema.slots import SlotRecords
from vibesys.states import Decision, Event, FailureClass, JobState, Outcome, decide

if TYPE_CHECKING:
    from sqlite_utils import Database

__all__ = [
    "BUSY_TIMEOUT_MS",
    "DEFAULT_PATH",
    "NETWORK_FS",
    "Journal",
    "filesystem_type",
    "journal_error",
    "journal_path",
    "open_journal",
]


#: SQLite's primary result codes for a write the file itself failed (or damage found).
WRITE_FAILURES = frozenset(
    {
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_PERM,
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_NOMEM,
        sqlite3.SQLITE_CORRUPT,
        sqlite3.SQLITE_NOTADB,
    }
)
_WHY = {
    sqlite3.SQLITE_FULL: "its disk is full",
    sqlite3.SQLITE_IOERR: "an I/O error",
    sqlite3.SQLITE_READONLY: "it is read-only now",
    sqlite3.SQLITE_BUSY: "another process kept it locked",
    sqlite3.SQLITE_LOCKED: "another process kept it locked",
}

# Every commit binds states, failure classes and outcomes. sqlite3 binds a str subclass
# without an adapter only after looking for one the slow way (two failed attribute lookups,
# each formatting an AttributeError): register the plain one.
for _enum in (JobState, FailureClass, Outcome):
    sqlite3.register_adapter(_enum, str)


@functools.cache
def _update_sql(columns: tuple[str, ...]) -> str:
    """The compare-and-swap's UPDATE for one set of changed columns."""
    sets = "".join(f", {name}=?" for name in columns)
    return (
        f"UPDATE invocations SET state=?, version=version+1, updated_at=?{sets} "
        "WHERE id=? AND state=? AND version=?"
    )


_APPEND_SQL = (
    "INSERT INTO history (invocation_id, seq, from_state, to_state, event, evidence, at) "
    "VALUES (?,?,?,?,?,?,?)"
)


class Journal(
    InvocationReads,
    LeaseRecords,
    ProgressRecords,
    ClusterRecords,
    PollRecords,
    SiteRecords,
    SlotRecords,
    BridgeRecords,
    QueueRecords,
):
    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path
        # One cursor for every commit: a connection's execute() makes a new one each time.
        self._commits = conn.cursor()
        #: the file this connection opened (device, inode): checked before every commit
        self._identity = file_identity(path)

    def check_identity(self) -> None:
        """Refuse to commit into a file that is no longer the journal at `path` (deleted, or
        replaced by another file): nobody would ever read what was committed there."""
        if self._identity is not None and file_identity(self.path) != self._identity:
            raise JournalFault(
                f"the journal {self.path} was deleted or replaced while in use (the file this "
                "process opened is no longer at that path)",
                replaced=True,
            )

    def rescue(self) -> Path | None:
        """After the file was deleted or replaced: its record (this connection still holds
        it) copied next to the path; the copy, or None when none could be made."""
        return rescue(self.conn, self.path)

    def fault(self, exc: sqlite3.Error) -> Exception:
        """A write's SQLite failure as our error: the file failing under it (full, I/O error,
        read-only, locked for good) a fault, damage as damage; anything else (a constraint,
        a bug) unchanged."""
        code = getattr(exc, "sqlite_errorcode", None)
        if code is None or code & 0xFF not in WRITE_FAILURES:
            return exc
        if code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
            return journal_error(exc, self.path, writing=True)
        why = _WHY.get(code & 0xFF, "it cannot be written")
        return JournalFault(f"the journal {self.path} cannot be written: {why} ({exc})")

    @property
    def db(self) -> Database:
        """The connection as a sqlite-utils Database (imported on first use)."""
        from sqlite_utils import Database

        return Database(self.conn)

    def close(self) -> None:
        self.conn.close()

    @contextmanager
    def write_txn(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taking the write lock up front (BEGIN IMMEDIATE). A write
        that fails (a full disk, an I/O error) or a journal no longer at its path raises
        JournalFault, and nothing of the transaction is committed."""
        conn = self.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                self.check_identity()
            except BaseException:
                rollback(conn)
                raise
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self.fault(exc) from None

    # -- writes -----------------------------------------------------------------------------

    def create_invocation(
        self,
        *,
        invocation_id: str,
        adapter: str,
        command: list[str],
        request: dict[str, Any],
        label: str | None,
        max_retries: int,
        invocation_dir: str,
        request_version: int = 1,
        cwd: str | None = None,
        env_file: str | None = None,
        lease_owner: str | None = None,
        lease_ttl: timedelta = timedelta(seconds=30),
        now: datetime | None = None,
        site: Rendering | None = None,
        settings: Settings | None = None,
        campaign: str | None = None,
    ) -> Invocation:
        """Record a new invocation (PREPARED), with the site configuration it runs with (kept
        once per digest) and its place in its campaign's queue, in the same transaction."""
        moment = now or utc_now()
        at = iso(moment)
        with self.write_txn() as conn:
            if site is not None:
                insert_site(conn, site, at)
            conn.execute(
                "INSERT INTO invocations (id, label, adapter, command, request, request_version,"
                " cwd, env_file, site_digest, state, version, attempt, max_retries, retries,"
                " cancel_requested, invocation_dir, created_at, updated_at, lease_owner,"
                " lease_expires_at, settings) VALUES (?,?,?,?,?,?,?,?,?,?,0,0,?,0,0,?,?,?,?,?,?)",
                (
                    invocation_id,
                    label,
                    adapter,
                    json.dumps(command),
                    json.dumps(request, sort_keys=True),
                    request_version,
                    cwd,
                    env_file,
                    site.digest if site is not None else None,
                    JobState.PREPARED,
                    max_retries,
                    invocation_dir,
                    at,
                    at,
                    lease_owner,
                    iso(moment + lease_ttl) if lease_owner else None,
                    (settings or Settings()).dumps(),
                ),
            )
            if campaign is not None:
                join_queue(conn, campaign, invocation_id, at)
        return self.get(invocation_id)

    def commit_transition(
        self, current: Invocation, event: Event, *, now: datetime | None = None
    ) -> tuple[Invocation, Decision]:
        """Move `current` by `event` if, and only if, nobody moved it since it was read."""
        decision = decide(current.state, event)
        at = now_iso() if now is None else iso(now)
        kind, evidence = encode_event(event)
        when = moment(at)
        columns, attempt_sql, attempt_params, facts = changes(current, event, decision, at, when)
        execute = self._commits.execute
        # The transaction of write_txn(), inlined: this runs on every transition.
        try:
            execute("BEGIN IMMEDIATE")
            try:
                where = (current.id, current.state, current.version)
                moved = execute(
                    _update_sql(tuple(columns)), (decision.state, at, *columns.values(), *where)
                ).rowcount
                if moved != 1:
                    raise StaleState(f"invocation {current.id} moved since it was read")
                execute(
                    _APPEND_SQL,
                    (
                        current.id,
                        current.version + 1,
                        current.state,
                        decision.state,
                        kind,
                        evidence,
                        at,
                    ),
                )
                if attempt_sql is not None:
                    execute(attempt_sql, attempt_params)
                self.check_identity()
            except BaseException:
                rollback(self.conn)
                raise
            execute("COMMIT")
        except sqlite3.Error as exc:
            raise self.fault(exc) from None
        # The row as committed, without reading it back: the compare-and-swap proved that
        # `current` was the whole truth until this transaction.
        changed = {"state": decision.state, "version": current.version + 1, "updated_at": when}
        return current.evolve({**changed, **columns, **facts}), decision


def open_journal(path: Path, *, readonly: bool = False) -> Journal:
    """Open (and, unless `readonly`, create or upgrade) the journal at `path`.

    Refuses, without writing anything: a file that is not a vibesys journal, a journal written
    by a newer schema, a damaged journal, and a journal on a network file system.
    """
    return Journal(open_database(path, readonly=readonly), path)
