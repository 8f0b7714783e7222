"""This user's private directory on this host, for what vibesys processes share with each
other and nobody else: the shared SSH connections' sockets and the start-up
slots of `vibesys run`. Standard library only."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import tempfile
from pathlib import Path


def private_dir() -> Path | None:
    """`$XDG_RUNTIME_DIR/vibesys-<uid>` (else under the temporary directory), made 0700; None
    when it cannot be made or is not ours and closed to others (then nothing is shared)."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if not base:
        base = tempfile.gettempdir()
    path = Path(base) / f"vibesys-{os.getuid()}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError:
        return None
    private = info.st_uid == os.getuid() and not info.st_mode & 0o077
    return path if stat.S_ISDIR(info.st_mode) and private else None


def listen_private(path: Path, backlog: int) -> socket.socket:
    """A Unix socket listening at `path` (mode 0600), in place of whatever file a dead server
    left there: the caller holds the lock that makes the name its own."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(previous)
    listener.listen(backlog)
    return listener
