"""Streaming a job's log files to the terminal as they grow, in bounded chunks.

The files keep the raw bytes; the terminal gets them decoded as UTF-8 with invalid bytes
replaced (a multi-byte character split across two reads is decoded whole)."""

from __future__ import annotations

import codecs
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

CHUNK = 1 << 16


class LogTail:
    """Copies new bytes of each followed file to its sink, remembering the offset per file."""

    def __init__(self, stdout: BinaryIO, stderr: BinaryIO) -> None:
        self._sinks = (stdout, stderr)
        self._offsets: dict[Path, int] = {}
        self._decoders: dict[Path, codecs.IncrementalDecoder] = {}
        self._sink_of: dict[Path, BinaryIO] = {}
        #: called before new bytes are written (a terminal's status line is erased first)
        self.before_write: Callable[[], None] | None = None

    def pump(self, paths: tuple[Path, Path]) -> int:
        """Copy whatever is new; return the number of bytes read."""
        copied = 0
        for path, sink in zip(paths, self._sinks, strict=True):
            offset = self._offsets.get(path, 0)
            if not path.exists():
                continue
            self._sink_of[path] = sink
            decoder = self._decoders.setdefault(
                path, codecs.getincrementaldecoder("utf-8")(errors="replace")
            )
            with open(path, "rb") as handle:
                handle.seek(offset)
                while chunk := handle.read(CHUNK):
                    if self.before_write is not None:
                        self.before_write()
                    sink.write(decoder.decode(chunk).encode("utf-8"))
                    offset += len(chunk)
                    copied += len(chunk)
            sink.flush()
            self._offsets[path] = offset
        return copied

    def close(self) -> None:
        """The files are complete: a multi-byte character cut off at the very end is shown as
        U+FFFD rather than dropped."""
        for path in list(self._decoders):
            rest = self._decoders.pop(path).decode(b"", final=True)
            if rest:
                sink = self._sink_of[path]
                sink.write(rest.encode("utf-8"))
                sink.flush()
