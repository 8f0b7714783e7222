"""Where a journal may be, how a new one comes into being, and how a journal in use proves it
is still the file at its path.

- A journal path names a regular file, or a name where one can be created: a device
  (`/dev/null`), a directory, a named pipe or a dangling symbolic link is refused
  before anything is created near it (SQLite would otherwise make `/dev/null-journal`).
- A new journal is built under a temporary name in the same directory, complete (WAL mode,
  every migration), then linked into place: a creation killed at any moment leaves no journal
  or a complete one, never a half-made file that read commands refuse. A leftover temporary
  file of a dead creator is removed by the next creation.
- A journal in use remembers the (device, inode) of the file it opened; a commit checks it
  against the path (`JournalFile.check_identity`), so a journal deleted or replaced mid-run is
  noticed at once. Its record is then copied next to the path when the directory allows.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from vibesys.errors import NotAJournal

__all__ = ["check_journal_path", "create_journal", "file_identity", "rescue", "rollback"]

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a named pipe",
    stat.S_IFSOCK: "a socket",
}


def check_journal_path(path: Path) -> None:
    """Refuse, in one line and before anything is created, a path that is not a regular file
    and could not become one."""
    text = os.fsdecode(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if os.path.lexists(path):
            raise NotAJournal(
                f"the journal {text} is a symbolic link to nothing; name the journal file itself"
            ) from None
        _check_parents(path)
        return
    except NotADirectoryError:
        _check_parents(path)
        return
    except OSError as exc:
        raise NotAJournal(f"the journal {text} cannot be used: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise NotAJournal(f"the journal {text} is {kind}, not a journal file")


def _check_parents(path: Path) -> None:
    """The nearest existing ancestor, where missing directories would be created, must be a
    directory."""
    probe = path.parent
    while not os.path.lexists(probe) and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        raise NotAJournal(
            f"cannot create the journal's directory {path.parent}: {probe} is not a directory"
        )


def create_journal(path: Path, migrate: Callable[[sqlite3.Connection], None]) -> None:
    """Make a complete journal at `path` (WAL mode, `migrate` applied), unless another
    process makes one there first: then theirs is kept and ours discarded."""
    _sweep(path)
    temporary = path.with_name(f".{path.name}.new-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        conn = sqlite3.connect(temporary, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL").fetchone()
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("BEGIN IMMEDIATE")
            migrate(conn)
            conn.execute("COMMIT")
        finally:
            conn.close()  # the last connection folds the WAL into the file and removes it
        _fsync(temporary)
        with _directory_lock(path.parent):
            if not os.path.lexists(path):
                # A WAL left at this name belongs to a journal that is gone; SQLite would
                # replay it into the new one.
                for stale in _companions(path)[1:]:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(stale)
                os.link(temporary, path)
        _fsync(path.parent)
    finally:
        for leftover in _companions(temporary):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)


@contextlib.contextmanager
def _directory_lock(directory: Path) -> Iterator[None]:
    """Creators of journals in one directory, one at a time (flock on the directory)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _companions(database: Path) -> tuple[Path, ...]:
    return tuple(database.with_name(database.name + suffix) for suffix in ("", "-wal", "-shm"))


def _sweep(path: Path) -> None:
    """Remove what a killed creation of this journal left (its creator's pid is gone)."""
    prefix = f".{path.name}.new-"
    with contextlib.suppress(OSError):
        for entry in os.scandir(path.parent):
            if not entry.name.startswith(prefix):
                continue
            pid = entry.name[len(prefix) :].partition("-")[0]
            if pid.isdigit() and not _alive(int(pid)):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def file_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at `path`, or None when nothing is there."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_dev, found.st_ino)


def rollback(conn: sqlite3.Connection) -> None:
    """End a failed write transaction; after an I/O error SQLite may have ended it already."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def rescue(conn: sqlite3.Connection, path: Path) -> Path | None:
    """Copy the journal this connection still holds next to `path`, where the directory still
    exists; the copy, or None when it could not be made."""
    saved: Path | None = path.with_name(f"{path.name}.rescued-{os.getpid()}")
    try:
        conn.execute("VACUUM INTO ?", (str(saved),))
    except sqlite3.Error:
        saved = None
    # Our WAL and its index still carry the old file's name: SQLite would replay them into
    # whatever journal comes to be at the path (the replacement, or this copy moved there).
    held = _held_files()
    for companion in _companions(path)[1:]:
        with contextlib.suppress(OSError):
            found = os.stat(companion)
            if (found.st_dev, found.st_ino) in held:
                os.unlink(companion)
    return saved


def _held_files() -> set[tuple[int, int]]:
    """(device, inode) of every file this process has open."""
    held: set[tuple[int, int]] = set()
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError, ValueError):
                found = os.fstat(int(name))
                held.add((found.st_dev, found.st_ino))
    return held
