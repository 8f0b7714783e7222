"""An attempt's stdout and stderr from the local spool, by byte offset.

The files keep raw bytes; the pages show them decoded as UTF-8 with invalid bytes replaced
(and escaped by the templates, or inserted as text by the script). A chunk never ends inside a
character: up to three trailing bytes of an unfinished one wait for the next read, so the
offsets handed to the browser always fall on character boundaries, unless the stream is over.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from vibesys.osutil.layout import STDERR, STDOUT, attempt_dir, log_paths

STREAMS = (STDOUT, STDERR)
#: How much of each stream a page shows (its end), and one live event carries at most.
TAIL_BYTES = 64 * 1024
CHUNK_BYTES = 64 * 1024


class Chunk(msgspec.Struct, frozen=True):
    stream: str
    #: the bytes [start, end) of the file, decoded
    start: int
    end: int
    #: the file's size when it was read
    size: int
    text: str

    def to_json(self) -> dict[str, object]:
        return {
            "stream": self.stream,
            "start": self.start,
            "end": self.end,
            "size": self.size,
            "text": self.text,
        }


def log_path(invocation_dir: str, attempt: int, stream: str) -> Path:
    out, err = log_paths(attempt_dir(invocation_dir, attempt))
    return out if stream == STDOUT else err


def complete(data: bytes) -> int:
    """How many leading bytes of `data` end on a UTF-8 character boundary (an invalid byte is
    a boundary: it is replaced, not waited for)."""
    for back in range(1, min(3, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80 or byte in (0xC0, 0xC1) or byte > 0xF4:  # ASCII, or never valid
            return len(data)
        if byte >= 0xC2:  # a lead byte: does its character fit in what is here?
            needed = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return len(data) if back >= needed else len(data) - back
    return len(data)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except (FileNotFoundError, NotADirectoryError):
        return 0


def _read(path: Path, offset: int, limit: int) -> bytes:
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            return handle.read(limit)
    except (FileNotFoundError, NotADirectoryError):
        return b""


def tail(path: Path, stream: str, limit: int = TAIL_BYTES) -> Chunk:
    """The end of the file: its last `limit` bytes, from a line's start when they cut one."""
    size = _size(path)
    start = max(0, size - limit)
    data = _read(path, start, size - start)
    if start > 0:
        newline = data.find(b"\n", 0, 4096)
        cut = newline + 1 if newline >= 0 else 0
        while cut < len(data) and 0x80 <= data[cut] < 0xC0:  # never start inside a character
            cut += 1
        data, start = data[cut:], start + cut
    keep = complete(data)
    return Chunk(stream, start, start + keep, size, data[:keep].decode("utf-8", "replace"))


def read_from(path: Path, stream: str, offset: int, final: bool = False) -> Chunk:
    """What the file holds past `offset` (at most CHUNK_BYTES). A file cut back below the
    offset (the spool redoes a copy a crash interrupted, byte for byte) gives nothing until it
    has grown past it again. `final`: the stream is over, an unfinished character is shown
    replaced."""
    size = _size(path)
    data = _read(path, offset, CHUNK_BYTES) if size > offset else b""
    keep = len(data) if final else complete(data)
    return Chunk(stream, offset, offset + keep, size, data[:keep].decode("utf-8", "replace"))


def follow(path: Path, stream: str, offset: int, final: bool = False) -> Chunk:
    """What a live page gets next past `offset`: the following bytes, or, when more than a
    tail's worth wait, the tail itself (its start past `offset`: the bytes between are
    skipped), so a page keeps up with any writer and holds no more than a page load shows."""
    if _size(path) - offset > TAIL_BYTES:
        found = tail(path, stream)
        if found.start > offset:
            return found
    return read_from(path, stream, offset, final)
