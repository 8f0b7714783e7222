"""Streaming a job's log files to the terminal as they grow, in bounded chunks."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

CHUNK = 1 << 16


class LogTail:
    """Copies new bytes of each followed file to its sink, remembering the offset per file."""

    def __init__(self, stdout: BinaryIO, stderr: BinaryIO) -> None:
        self._sinks = (stdout, stderr)
        self._offsets: dict[Path, int] = {}

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
                    sink.write(chunk)
                    offset += len(chunk)
                    copied += len(chunk)
            sink.flush()
            self._offsets[path] = offset
        return copied
