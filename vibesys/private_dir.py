"""This user's private directory on this host, for what vibesys processes share with each
other and nobody else: the shared SSH connections' sockets and the sockets of the `vibesys run`
servers. Stdlib only (the entry point imports it before anything heavy)."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def private_dir() -> Path | None:
    """`$XDG_RUNTIME_DIR/vibesys-<uid>` (else under the temporary directory), made 0700; None
    when it cannot be made or is not ours and closed to others (then nothing is shared)."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if not base:
        import tempfile  # 6 ms of imports that a runtime directory spares

        base = tempfile.gettempdir()
    path = Path(base) / f"vibesys-{os.getuid()}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError:
        return None
    private = info.st_uid == os.getuid() and not info.st_mode & 0o077
    return path if stat.S_ISDIR(info.st_mode) and private else None
