"""Streaming a job's log files to `vibesys run`'s, `wait`'s and `logs`' own stdout and stderr
as they grow, in bounded chunks.

Bytes are bytes: what reaches the sink is exactly what the job wrote, whatever its encoding
(binary, Latin-1, UTF-8 cut anywhere), into a terminal, a pipe or a file alike. Only the
status line meant for a terminal (`vibesys/cli/live.py`) is text of our own."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

CHUNK = 1 << 16


class LogTail:
    """Copies new bytes of each followed file to its sink, remembering the offset per file."""

    def __init__(self, stdout: BinaryIO, stderr: BinaryIO) -> None:
        self._sinks = (stdout, stderr)
        self._offsets: dict[Path, int] = {}
        #: called before new bytes are written (a terminal's status line is erased first)
        self.before_write: Callable[[], None] | None = None

    def pump(self, paths: tuple[Path, Path]) -> int:
        """Copy whatever is new; return the number of bytes copied."""
        copied = 0
        for path, sink in zip(paths, self._sinks, strict=True):
            offset = self._offsets.get(path, 0)
            if not path.exists():
                continue
            with open(path, "rb") as handle:
                handle.seek(offset)
                while chunk := handle.read(CHUNK):
                    if self.before_write is not None:
                        self.before_write()
                    sink.write(chunk)
                    offset += len(chunk)
                    copied += len(chunk)
            sink.flush()
            self._offsets[path] = offset
        return copied

    def close(self) -> None:
        """The files are complete. Nothing is held back between chunks, so nothing is left."""


class SpoolOnly(LogTail):
    """A tail for a driver nobody watches (the bridge's, a client's handle): the job's logs
    still come home into its local attempt directory as it runs, and go nowhere else."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO(), io.BytesIO())

    def pump(self, paths: tuple[Path, Path]) -> int:
        return 0

    def close(self) -> None:
        pass
