"""What the commands that drive invocations share: ending with one failure line, a journal
that fails while an invocation is driven, opening the journal and building an engine. Its own
module so that command groups (`clusters.py`) need not import the app that registers them.
The error boundary itself is `vibesys.errors.boundary`, below the CLI, so the broker's and the
bridge's commands use the same one."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn

from vibesys.engine import Engine
from vibesys.errors import (
    DEFAULT_JOURNAL,
    EXIT_JOURNAL_FAULT,
    CommandFailed,
    JournalError,
    JournalFault,
    StaleState,
    journal_path,
)
from vibesys.journal_schema import Journal, open_journal


def fail(message: str, status: int = 2) -> NoReturn:
    """End the command with one error line and `status` (the entry prints it)."""
    raise CommandFailed(message, status)


def journal_fault(exc: JournalFault, invocation: str | None, store: Journal | None = None) -> str:
    """The one line for a journal that failed under a write: what failed, which invocation
    may still be running, and the way out."""
    path = store.path if store is not None else None
    reconcile = "`vibesys reconcile`"
    if path is not None and path != DEFAULT_JOURNAL:
        reconcile = f"`vibesys reconcile --journal {path}`"
    if exc.replaced:
        saved = store.file.rescue() if store is not None else None
        way = f"move {saved} to {path}" if saved else "put the journal back"
    else:
        way = "fix the disk"
    if invocation is None:
        return f"{exc}; nothing was run: {way}, then run {reconcile}"
    return f"{exc}; invocation {invocation} may still be running: {way}, then run {reconcile}"


@contextmanager
def journal_faults(store: Journal, invocation: str) -> Iterator[None]:
    """While `invocation` is driven: a journal that fails is one line and status 73."""
    try:
        yield
    except (JournalError, sqlite3.Error) as exc:
        if isinstance(exc, StaleState):
            raise
        raise CommandFailed(journal_failed(exc, invocation, store), EXIT_JOURNAL_FAULT) from None


def journal_failed(exc: Exception, invocation: str | None, store: Journal) -> str:
    """The line for a journal that failed while `invocation` was driven (None: while it was
    being recorded)."""
    if not isinstance(exc, JournalFault):
        exc = JournalFault(f"the journal {store.path} failed while in use ({exc})")
    return journal_fault(exc, invocation, store)


def open_store(journal: Path | None, *, readonly: bool = False) -> Journal:
    return open_journal(journal_path(journal), readonly=readonly)


def make_engine(journal: Journal, unreachable_timeout: float = 0.0, **settings: Any) -> Engine:
    return Engine(journal, unreachable_timeout=timedelta(seconds=unreachable_timeout), **settings)
