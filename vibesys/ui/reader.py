"""Reading the journal without writing anything: not to the database, not to its `-wal`, not
to its `-shm`, and without a lock a writer would wait on.

Every read is one short transaction on a connection of its own, closed at once, so nothing is
held between requests (a writer that closes last still checkpoints and removes its `-wal`).
How it opens depends on what SQLite's WAL has left beside the file:

- `-wal` and `-shm` both there (a writer has the journal open, or one died): `mode=ro` with
  `readonly_shm=1`. A plain `mode=ro` reader writes its read mark into the `-shm` (the WAL's
  shared index); with `readonly_shm` SQLite maps it read-only, using a read mark a writer left
  or, when no live connection keeps the index, a private copy built from the `-wal`.
- otherwise (every writer closed: the WAL was checkpointed into the file and removed): the
  file alone is the whole journal. `mode=ro` would create an empty `-wal` and a `-shm`, so the
  file is read `immutable=1` (no lock, no file made), and the read counts only if nothing
  changed meanwhile: the file's size, time and inode are the same after it as before, and no
  `-wal` appeared (else the read is done again, the new way).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

from vibesys.errors import JournalError, UsageError
from vibesys.journal_schema.opening import _check_schema, journal_error
from vibesys.journal_schema.store import Journal

T = TypeVar("T")

#: A read that kept racing a writer's start or end is tried this many times.
_TRIES = 8
#: SQLite waits this long for a lock during the rare moments a reader must (a writer's close).
_BUSY_SECONDS = 2.0


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class JournalReader:
    """The journal at `path`, read one short transaction at a time (see the module's doc)."""

    def __init__(self, path: Path) -> None:
        self.path = path.absolute()
        self._wal = Path(f"{self.path}-wal")
        self._shm = Path(f"{self.path}-shm")
        self._uri = "file:" + quote(str(self.path))

    def stamp(self) -> tuple[object, ...]:
        """Changes whenever anything is committed (the WAL grows or is rewritten, a checkpoint
        writes the file): what the live views poll, without opening the journal."""
        return (_stamp(self.path), _stamp(self._wal))

    def check(self) -> None:
        """Refuse now, in one line, what every read would refuse (no journal, not a journal,
        an older or newer schema, a damaged file)."""
        if not self.path.is_file():
            raise UsageError(f"no journal at {self.path}")
        self.read(lambda journal: None)

    def read(self, body: Callable[[Journal], T]) -> T:
        """`body` run on a read-only Journal inside one read transaction."""
        for _ in range(_TRIES):
            try:
                if self._wal.exists() and self._shm.exists():
                    done, result = self._shared(body)
                else:
                    done, result = self._alone(body)
            except sqlite3.Error as exc:
                if _stamp(self.path) is None:
                    raise UsageError(f"no journal at {self.path}") from None
                raise journal_error(exc, self.path) from None
            if done:
                return result  # type: ignore[return-value]
            time.sleep(0.01)
        raise JournalError(f"the journal {self.path} kept changing while it was read; try again")

    def _shared(self, body: Callable[[Journal], T]) -> tuple[bool, T | None]:
        """Read beside live (or left) WAL files; (False, None) when they went meanwhile."""
        try:
            conn = self._connect("mode=ro&readonly_shm=1")
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode == sqlite3.SQLITE_CANTOPEN and not self._shm.exists():
                return False, None  # the last writer closed between the look and the open
            raise
        try:
            return True, self._transaction(conn, body)
        finally:
            conn.close()

    def _alone(self, body: Callable[[Journal], T]) -> tuple[bool, T | None]:
        """Read the file as it stands; (False, None) when it changed meanwhile."""
        before = _stamp(self.path)
        if before is None:
            raise UsageError(f"no journal at {self.path}")
        conn = self._connect("mode=ro&immutable=1")
        try:
            result = self._transaction(conn, body)
        except sqlite3.DatabaseError:
            # A checkpoint may have rewritten pages under this read: only then is it no proof.
            if _stamp(self.path) != before or self._wal.exists():
                return False, None
            raise
        finally:
            conn.close()
        if _stamp(self.path) != before or self._wal.exists():
            return False, None
        return True, result

    def _connect(self, mode: str) -> sqlite3.Connection:
        conn = sqlite3.connect(
            f"{self._uri}?{mode}", uri=True, isolation_level=None, timeout=_BUSY_SECONDS
        )
        conn.execute("PRAGMA query_only=ON")
        return conn

    def _transaction(self, conn: sqlite3.Connection, body: Callable[[Journal], T]) -> T:
        conn.execute("BEGIN")
        _check_schema(conn, self.path, readonly=True)
        result = body(Journal(conn, self.path))
        conn.execute("COMMIT")
        return result


def journal_files(path: Path) -> dict[str, bytes | None]:
    """The journal's file and its WAL files, as bytes (None: absent): what a read must never
    change (the tests compare them before and after)."""
    found: dict[str, bytes | None] = {}
    for suffix in ("", "-wal", "-shm"):
        name = f"{path}{suffix}"
        try:
            with open(name, "rb") as handle:
                found[os.path.basename(name)] = handle.read()
        except FileNotFoundError:
            found[os.path.basename(name)] = None
    return found
