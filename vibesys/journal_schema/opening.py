"""Opening the journal: where it is, refusing what it must not be (not a journal, a newer
schema, a network file system, a damaged file), WAL and the pragmas, and the migrations,
applied under the write lock. SQLite's own failures become our errors by their error codes.

Reading needs only sqlite3: the schema is checked with plain queries against the list of
known steps (`schema_steps.py`); sqlite-utils is imported when migrations are applied."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Final

from vibesys.errors import (
    DEFAULT_JOURNAL,
    JournalCorrupt,
    JournalError,
    JournalOnNetworkFS,
    JournalTooNew,
    NotAJournal,
    UsageError,
)

# Below the journal, for the error boundary; callers of the journal find them here too.
from vibesys.errors import journal_error as journal_error
from vibesys.errors import journal_path as journal_path
from vibesys.journal_schema.creation import check_journal_path, create_journal
from vibesys.journal_schema.schema_steps import KNOWN, MIGRATION_SET

DEFAULT_PATH: Final = DEFAULT_JOURNAL
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


def open_database(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """The journal's connection at `path`, created or upgraded unless `readonly` (the store
    wraps it: `store.open_journal`).

    Refuses, without writing anything: a file that is not a vibesys journal, a journal written
    by a newer schema, a damaged journal, and a journal on a network file system.
    """
    check_journal_path(path)
    if readonly and not path.exists():
        raise UsageError(f"no journal at {path}")
    if not readonly:
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
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise JournalError(
                f"cannot create the journal's directory {path.parent}: {exc.strerror or exc}"
            ) from None
        # SQLite would quietly open a file it may not write read-only, and fail later.
        for needed in (path, path.parent):
            if needed.exists() and not os.access(needed, os.W_OK):
                raise JournalError(
                    f"cannot open the journal {path} for writing: {needed} is not writable "
                    "(journal list, show and verify can still read it)"
                )
        if not path.exists():
            _create(path)
    conn = _connect(path, readonly)
    try:
        applied = _check_schema(conn, path, readonly)
        if not readonly:
            _enter_wal(conn)
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA foreign_keys=ON")
        # A journal with every step applied has nothing to migrate: no need for sqlite-utils
        # (it costs every `vibesys run` tens of milliseconds to import).
        if not readonly and not applied.issuperset(KNOWN):
            # Check again and migrate under the write lock, in one transaction (sqlite-utils
            # nests its steps as savepoints): two processes opening a fresh journal at once
            # must neither both run m001 nor see the other's half-created schema. Only the
            # one that still finds steps missing imports sqlite-utils: dozens of `vibesys
            # run` started at once in a new project would each pay for it otherwise.
            conn.execute("BEGIN IMMEDIATE")
            try:
                if not _check_schema(conn, path, readonly).issuperset(KNOWN):
                    _migrate(conn)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise journal_error(exc, path) from None
    except JournalError:
        conn.close()
        raise
    return conn


def _create(path: Path) -> None:
    """A new journal, complete before it appears at `path` (`creation.py`)."""
    try:
        create_journal(path, _migrate)
    except sqlite3.Error as exc:
        raise journal_error(exc, path, writing=True) from None
    except OSError as exc:
        raise JournalError(f"cannot create the journal {path}: {exc.strerror or exc}") from None


def _migrate(conn: sqlite3.Connection) -> None:
    from sqlite_utils import Database

    from vibesys.journal_schema.migrations import migrations

    migrations.apply(Database(conn))


def _connect(path: Path, readonly: bool) -> sqlite3.Connection:
    """A connection that has read the schema. A journal that can only be read (a read-only
    file or directory, where SQLite cannot share its WAL index) is opened as immutable: it
    can be listed, shown and verified, never written."""
    modes = ["?mode=ro", "?mode=ro&immutable=1"] if readonly else [""]
    last: sqlite3.Error | None = None
    for mode in modes:
        try:
            conn = sqlite3.connect(
                f"file:{path.resolve()}{mode}",
                uri=True,
                isolation_level=None,
                timeout=BUSY_TIMEOUT_MS / 1000,
            )
        except sqlite3.Error as exc:
            last = exc
            continue
        try:
            conn.execute("PRAGMA schema_version").fetchone()
            return conn
        except sqlite3.Error as exc:
            conn.close()
            last = exc
            if exc.sqlite_errorcode in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
                break
    assert last is not None
    raise journal_error(last, path, writing=not readonly) from None


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


def _check_schema(conn: sqlite3.Connection, path: Path, readonly: bool) -> set[str]:
    """The steps applied to the journal at `path`, once it is known to be one we may use."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables:
        if readonly:
            raise NotAJournal(f"{path} is an empty database, not a vibesys journal")
        return set()
    applied: set[str] = set()
    if "_sqlite_migrations" in tables:
        # sqlite-utils' record of applied steps, read without it.
        rows = conn.execute(
            "SELECT name FROM _sqlite_migrations WHERE migration_set = ?", (MIGRATION_SET,)
        )
        applied = {row[0] for row in rows}
    if not applied and "invocations" in tables:
        # Our tables are there but their record of migrations reads empty: damaged pages can
        # look like that. Say which it is.
        check = conn.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            raise JournalCorrupt(f"{path} is a damaged journal ({check}); restore it from a backup")
    if not applied or "invocations" not in tables:
        raise NotAJournal(f"{path} is an SQLite database but not a vibesys journal")
    newer = sorted(applied - KNOWN)
    if newer:
        raise JournalTooNew(
            f"{path} was written by a newer vibesys (schema step {newer[0]}); upgrade vibesys"
        )
    if readonly and KNOWN - applied:
        raise JournalError(f"{path} has an older schema; run `vibesys reconcile` to upgrade it")
    return applied
