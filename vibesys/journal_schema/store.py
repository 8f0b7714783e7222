"""The journal: one SQLite file, WAL with synchronous=FULL, one writer at a time.

Every transition is one `BEGIN IMMEDIATE` transaction that compare-and-swaps the invocation's
(state, version), appends to the append-only history with the event's evidence, and updates
the current row. The engine performs the effect a transition authorizes only after
`commit_transition` has returned.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from vibesys.errors import (
    JournalError,
    JournalOnNetworkFS,
    JournalTooNew,
    NotAJournal,
    StaleState,
    UsageError,
)
from vibesys.journal_schema.clock import iso, utc_now
from vibesys.journal_schema.codec import encode_event
from vibesys.journal_schema.leases import LeaseRecords
from vibesys.journal_schema.migrations import KNOWN, migrations
from vibesys.journal_schema.progress import ProgressRecords
from vibesys.journal_schema.records import Attempt, HistoryRow, Invocation
from vibesys.journal_schema.rows import attempt_facts, attempt_updates, row_updates
from vibesys.states import (
    Decision,
    Event,
    FailureClass,
    JobState,
    decide,
)

DEFAULT_PATH = Path(".vibesys") / "journal.db"
BUSY_TIMEOUT_MS = 30_000
#: File systems where SQLite's WAL (shared memory between processes on one host) is unsafe.
NETWORK_FS = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "lustre",
        "gpfs",
        "ceph",
        "glusterfs",
        "fuse.glusterfs",
        "fuse.sshfs",
        "beegfs",
        "afs",
        "9p",
    }
)
#: The invocation row joined with its current attempt's facts (one indexed lookup each).
_ROW_COLUMNS = (
    "i.id AS id, label, adapter, command, request, request_version, cwd, env_file, state, "
    "version, i.attempt AS attempt, max_retries, retries, outcome, exit_code, "
    "i.failure_class AS failure_class, cancel_requested, not_before, run_dir, created_at, "
    "updated_at, lease_owner, lease_expires_at, a.job_id AS a_job_id, "
    "a.dispatched_at AS a_dispatched_at, a.fence_intended_at AS a_fence_intended_at, "
    "a.intended_at AS a_intended_at, a.job_name AS a_job_name"
)
_FROM = (
    "FROM invocations i LEFT JOIN attempts a ON a.invocation_id = i.id AND a.attempt = i.attempt"
)


def journal_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """--journal, else $VIBESYS_JOURNAL, else .vibesys/journal.db in the current directory."""
    if explicit:
        return Path(explicit)
    from_env = os.environ.get("VIBESYS_JOURNAL")
    return Path(from_env) if from_env else DEFAULT_PATH


def filesystem_type(directory: Path) -> str | None:
    """The type of the file system holding `directory`, from /proc/mounts."""
    try:
        with open("/proc/mounts", encoding="utf-8") as handle:
            mounts = [line.split()[1:3] for line in handle if len(line.split()) >= 3]
    except OSError:
        return None
    target = str(directory.resolve())
    best: tuple[int, str | None] = (-1, None)
    for mount_point, fs_type in mounts:
        mount_point = mount_point.replace("\\040", " ")
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) > best[0]:
            best = (len(mount_point), fs_type)
    return best[1]


def open_journal(path: Path, *, readonly: bool = False) -> Journal:
    """Open (and, unless `readonly`, create or upgrade) the journal at `path`.

    Refuses, without writing anything: a file that is not a vibesys journal, a journal written
    by a newer schema, and a journal on a network file system.
    """
    if readonly and not path.exists():
        raise UsageError(f"no journal at {path}")
    if not readonly:
        if path.exists() and path.is_dir():
            raise NotAJournal(f"{path} is a directory, not a journal file")
        # The nearest existing directory: where missing parents would be created.
        probe = path.parent
        while not probe.exists() and probe.parent != probe:
            probe = probe.parent
        fs_type = filesystem_type(probe)
        if fs_type in NETWORK_FS:
            raise JournalOnNetworkFS(
                f"{path} is on a {fs_type} file system; SQLite WAL needs a local disk "
                "(set --journal or VIBESYS_JOURNAL to a node-local path)"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
    uri = f"file:{path.resolve()}{'?mode=ro' if readonly else ''}"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        conn.execute("PRAGMA schema_version").fetchone()
    except sqlite3.DatabaseError as exc:
        raise NotAJournal(f"{path} is not a vibesys journal ({exc})") from exc
    db = Database(conn)
    try:
        _check_schema(db, path, readonly)
        if not readonly:
            _enter_wal(conn)
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA foreign_keys=ON")
        if not readonly:
            # Check again and migrate under the write lock, in one transaction (sqlite-utils
            # nests its steps as savepoints): two processes opening a fresh journal at once
            # must neither both run m001 nor see the other's half-created schema.
            conn.execute("BEGIN IMMEDIATE")
            try:
                _check_schema(db, path, readonly)
                migrations.apply(db)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise NotAJournal(f"{path} is not a usable vibesys journal ({exc})") from exc
    except JournalError:
        conn.close()
        raise
    return Journal(db, path)


def _enter_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL. SQLite answers SQLITE_BUSY at once, without the busy handler, while
    another connection is switching the same fresh file: wait for it up to the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL").fetchone()
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


def _check_schema(db: Database, path: Path, readonly: bool) -> None:
    tables = set(db.table_names())
    if not tables:
        if readonly:
            raise NotAJournal(f"{path} is an empty database, not a vibesys journal")
        return
    applied = {m.name for m in migrations.applied(db)}
    if not applied or "invocations" not in tables:
        raise NotAJournal(f"{path} is an SQLite database but not a vibesys journal")
    newer = sorted(applied - KNOWN)
    if newer:
        raise JournalTooNew(
            f"{path} was written by a newer vibesys (schema step {newer[0]}); upgrade vibesys"
        )
    if readonly and KNOWN - applied:
        raise JournalError(f"{path} has an older schema; run `vibesys reconcile` to upgrade it")


class Journal(LeaseRecords, ProgressRecords):
    def __init__(self, db: Database, path: Path) -> None:
        self.db = db
        self.conn: sqlite3.Connection = db.conn
        self.path = path

    def close(self) -> None:
        self.conn.close()

    @contextmanager
    def write_txn(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taking the write lock up front (BEGIN IMMEDIATE)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

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
        run_dir: str,
        request_version: int = 1,
        cwd: str | None = None,
        env_file: str | None = None,
        lease_owner: str | None = None,
        lease_ttl: timedelta = timedelta(seconds=30),
        now: datetime | None = None,
    ) -> Invocation:
        moment = now or utc_now()
        at = iso(moment)
        with self.write_txn() as conn:
            conn.execute(
                "INSERT INTO invocations (id, label, adapter, command, request, request_version,"
                " cwd, env_file, state, version, attempt, max_retries, retries, cancel_requested,"
                " run_dir, created_at, updated_at, lease_owner, lease_expires_at)"
                " VALUES (?,?,?,?,?,?,?,?,?,0,0,?,0,0,?,?,?,?,?)",
                (
                    invocation_id,
                    label,
                    adapter,
                    json.dumps(command),
                    json.dumps(request, sort_keys=True),
                    request_version,
                    cwd,
                    env_file,
                    JobState.PREPARED,
                    max_retries,
                    run_dir,
                    at,
                    at,
                    lease_owner,
                    iso(moment + lease_ttl) if lease_owner else None,
                ),
            )
        return self.get(invocation_id)

    def commit_transition(
        self, current: Invocation, event: Event, *, now: datetime | None = None
    ) -> tuple[Invocation, Decision]:
        """Move `current` by `event` if, and only if, nobody moved it since it was read."""
        decision = decide(current.state, event)
        at = iso(now or utc_now())
        kind, evidence = encode_event(event)
        columns = row_updates(current, event, decision)
        sets = "".join(f", {name}=?" for name in columns)
        with self.write_txn() as conn:
            cursor = conn.execute(
                f"UPDATE invocations SET state=?, version=version+1, updated_at=?{sets} "
                "WHERE id=? AND state=? AND version=?",
                (decision.state, at, *columns.values(), current.id, current.state, current.version),
            )
            if cursor.rowcount != 1:
                raise StaleState(f"invocation {current.id} moved since it was read")
            conn.execute(
                "INSERT INTO history (invocation_id, seq, from_state, to_state, event, evidence,"
                " at) VALUES (?,?,?,?,?,?,?)",
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
            attempt_updates(conn, current, event, at)
        # The row as committed, without reading it back: the compare-and-swap proved that
        # `current` was the whole truth until this transaction.
        after = dataclasses.replace(
            current,
            state=decision.state,
            version=current.version + 1,
            updated_at=at,
            **columns,
            **attempt_facts(current, event, at),
        )
        return after, decision

    # -- reads ------------------------------------------------------------------------------

    def get(self, invocation_id: str) -> Invocation:
        cursor = self.conn.execute(f"SELECT {_ROW_COLUMNS} {_FROM} WHERE i.id=?", (invocation_id,))
        row = cursor.fetchone()
        if row is None:
            raise UsageError(f"unknown invocation {invocation_id}")
        return Invocation.from_row(_as_dict(cursor, row))

    def resolve(self, prefix: str) -> Invocation:
        """The one invocation whose id starts with `prefix` (an index range scan)."""
        if not prefix:
            raise UsageError("an invocation id (or a unique prefix of one) is required")
        cursor = self.conn.execute(
            f"SELECT {_ROW_COLUMNS} {_FROM} WHERE i.id >= ? AND i.id < ? ORDER BY i.id LIMIT 2",
            (prefix, prefix + "\U0010ffff"),
        )
        rows = cursor.fetchall()
        if not rows:
            raise UsageError(f"unknown invocation {prefix}")
        if len(rows) > 1 and rows[0][0] != prefix:  # an exact id wins over longer ones
            raise UsageError(f"invocation prefix {prefix} is ambiguous; give more characters")
        return Invocation.from_row(_as_dict(cursor, rows[0]))

    def list_invocations(self, state: JobState | None = None) -> list[Invocation]:
        where, params = ("WHERE state=?", (state,)) if state else ("", ())
        cursor = self.conn.execute(
            f"SELECT {_ROW_COLUMNS} {_FROM} {where} ORDER BY created_at, i.id", params
        )
        return [Invocation.from_row(_as_dict(cursor, row)) for row in cursor.fetchall()]

    def active(self) -> list[Invocation]:
        cursor = self.conn.execute(
            f"SELECT {_ROW_COLUMNS} {_FROM} WHERE state != ? ORDER BY created_at, i.id",
            (JobState.DONE,),
        )
        return [Invocation.from_row(_as_dict(cursor, row)) for row in cursor.fetchall()]

    def attempts(self, invocation_id: str) -> list[Attempt]:
        rows = self.conn.execute(
            "SELECT attempt, job_name, job_id, failure_class, intended_at, submitted_at, "
            "dispatched_at, fence_intended_at, claim, provenance "
            "FROM attempts WHERE invocation_id=? ORDER BY attempt",
            (invocation_id,),
        ).fetchall()
        return [
            Attempt(
                attempt=row[0],
                job_name=row[1],
                job_id=row[2],
                failure_class=FailureClass(row[3]) if row[3] else None,
                intended_at=row[4],
                submitted_at=row[5],
                dispatched_at=row[6],
                fence_intended_at=row[7],
                claim=row[8],
                provenance=json.loads(row[9]) if row[9] else {},
            )
            for row in rows
        ]

    def record_attempt_detail(
        self,
        invocation_id: str,
        attempt: int,
        *,
        claim: str | None = None,
        provenance: dict[str, Any] | None = None,
    ) -> None:
        """Keep what was learnt about an attempt (its claim, where it ran) beside it. Not a
        transition: it moves nothing, and a later reading may add to it."""
        with self.write_txn() as conn:
            if claim is not None:
                conn.execute(
                    "UPDATE attempts SET claim=? WHERE invocation_id=? AND attempt=?",
                    (claim, invocation_id, attempt),
                )
            if provenance:
                row = conn.execute(
                    "SELECT provenance FROM attempts WHERE invocation_id=? AND attempt=?",
                    (invocation_id, attempt),
                ).fetchone()
                merged = {**(json.loads(row[0]) if row and row[0] else {}), **provenance}
                conn.execute(
                    "UPDATE attempts SET provenance=? WHERE invocation_id=? AND attempt=?",
                    (json.dumps(merged, sort_keys=True), invocation_id, attempt),
                )

    def history(self, invocation_id: str) -> list[HistoryRow]:
        rows = self.conn.execute(
            "SELECT seq, from_state, to_state, event, at, evidence FROM history "
            "WHERE invocation_id=? ORDER BY seq",
            (invocation_id,),
        ).fetchall()
        return [
            HistoryRow(seq, JobState(src), JobState(dst), event, at, json.loads(evidence))
            for seq, src, dst, event, at, evidence in rows
        ]

    def raw_history(self, invocation_id: str) -> list[tuple[int, str, str, str, str]]:
        """(seq, from, to, event, evidence) exactly as stored, for verification."""
        return self.conn.execute(
            "SELECT seq, from_state, to_state, event, evidence FROM history "
            "WHERE invocation_id=? ORDER BY seq",
            (invocation_id,),
        ).fetchall()

    def all_ids(self) -> list[str]:
        return [row[0] for row in self.conn.execute("SELECT id FROM invocations ORDER BY id")]


def _as_dict(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> dict[str, Any]:
    return {column[0]: value for column, value in zip(cursor.description, row, strict=True)}
