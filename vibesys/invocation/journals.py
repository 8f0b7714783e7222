"""The journal for one call at a time, as a handle or a client uses it from any thread."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vibesys.journal_schema.store import Journal, open_journal

__all__ = ["JournalAccess"]


class JournalAccess:
    """The journal at `path`: the caller's open connection when it gave one (used from the
    caller's thread and never closed here), else a connection of its own for each call (a
    handle is used from any thread, asyncio's workers too, and a connection stays on the
    thread that opened it)."""

    def __init__(self, path: Path, connection: Journal | None = None) -> None:
        self.path = path
        self.connection = connection

    @contextmanager
    def open(self) -> Iterator[Journal]:
        if self.connection is not None:
            yield self.connection
            return
        journal = open_journal(self.path)
        try:
            yield journal
        finally:
            journal.close()
