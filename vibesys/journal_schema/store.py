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
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from vibesys.errors import StaleState
from vibesys.journal_schema.clock import iso, moment, now_iso, utc_now
from vibesys.journal_schema.clusters import ClusterStore
from vibesys.journal_schema.codec import encode_event
from vibesys.journal_schema.creation import rollback
from vibesys.journal_schema.journal_file import JournalFile
from vibesys.journal_schema.leases import LeaseStore
from vibesys.journal_schema.opening import (
    BUSY_TIMEOUT_MS,
    DEFAULT_PATH,
    NETWORK_FS,
    filesystem_type,
    journal_error,
    journal_path,
    open_database,
)
from vibesys.journal_schema.polls import PollStore
from vibesys.journal_schema.progress import ProgressStore
from vibesys.journal_schema.queue import QueueStore, join_queue
from vibesys.journal_schema.reads import InvocationRows, InvocationStore, RequestDecoder
from vibesys.journal_schema.recorded_evaluations import BridgeStore
from vibesys.journal_schema.records import Invocation
from vibesys.journal_schema.rows import changes
from vibesys.journal_schema.settings import Settings
from vibesys.journal_schema.sites import Rendering, SiteStore, insert_site
from vibesys.journal_schema.slots import SlotStore
from vibesys.states import Decision, Event, FailureClass, JobState, Outcome, decide

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


class Journal:
    """The facade: the file, the two writes every invocation goes through (its creation and
    each transition), and one small store per kind of record."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.file = JournalFile(conn, path)
        self.conn = conn
        self.path = path
        self.write_txn = self.file.write_txn
        # One cursor for every commit: a connection's execute() makes a new one each time.
        self._commits = conn.cursor()
        self.sites = SiteStore(self.file)
        self.rows = InvocationRows(self.sites)
        self.invocations = InvocationStore(self.file, self.rows)
        self.leases = LeaseStore(self.file)
        self.progress = ProgressStore(self.file)
        self.clusters = ClusterStore(self.file)
        self.polls = PollStore(self.file, self.rows)
        self.slots = SlotStore(self.file)
        self.bridge = BridgeStore(self.file)
        self.queue = QueueStore(self.file)

    def close(self) -> None:
        self.file.close()

    def decode_requests(self, decoder: RequestDecoder) -> None:
        """From now on, every invocation read carries its adapter's typed request (the
        engine's journal); without this, invocations carry only the recorded JSON."""
        self.rows.decoder = decoder

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
        return self.invocations.get(invocation_id)

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
                self.file.check_identity()
            except BaseException:
                rollback(self.conn)
                raise
            execute("COMMIT")
        except sqlite3.Error as exc:
            raise self.file.fault(exc) from None
        # The row as committed, without reading it back: the compare-and-swap proved that
        # `current` was the whole truth until this transaction.
        changed = {"state": decision.state, "version": current.version + 1, "updated_at": when}
        moved_to = current.evolve({**changed, **columns, **facts})
        if "site_digest" in columns:  # the request goes on with the replacing site
            moved_to = self.rows.typed(moved_to)
        return moved_to, decision


def open_journal(path: Path, *, readonly: bool = False) -> Journal:
    """Open (and, unless `readonly`, create or upgrade) the journal at `path`.

    Refuses, without writing anything: a file that is not a vibesys journal, a journal written
    by a newer schema, a damaged journal, and a journal on a network file system.
    """
    return Journal(open_database(path, readonly=readonly), path)
