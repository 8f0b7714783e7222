"""The journal's file: one SQLite connection, its write transaction, and how a failed write
becomes our error. Every store writes through `write_txn`."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vibesys.errors import JournalFault
from vibesys.journal_schema.creation import file_identity, rescue, rollback
from vibesys.journal_schema.opening import journal_error

__all__ = ["WRITE_FAILURES", "JournalFile"]


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


class JournalFile:
    """The open connection and the path it was opened at."""

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
