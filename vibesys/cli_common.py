"""What every typer command module shares: one failure line, clean errors, opening the journal
and building an engine. Its own module so that command groups (`cli_clusters.py`) need not
import the app that registers them."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from vibesys.errors import VibesysError

if TYPE_CHECKING:
    from vibesys.engine import Engine
    from vibesys.journal_schema import Journal


def fail(message: str, status: int = 2) -> NoReturn:
    # typer is imported here, not above: `vibesys run` opens the journal through this module
    # without the typer app.
    import typer

    typer.echo(f"vibesys: error: {message}", err=True)
    raise typer.Exit(status)


@contextmanager
def clean_errors(journal: Path | None = None) -> Iterator[None]:
    """Our errors become one line and exit status 2, never a traceback; so does SQLite's,
    when a damaged journal shows itself only half-way through a read."""
    try:
        yield
    except VibesysError as exc:
        fail(str(exc))
    except sqlite3.Error as exc:
        from vibesys.journal_schema import journal_error, journal_path

        fail(str(journal_error(exc, journal_path(journal))))


def open_store(journal: Path | None, *, readonly: bool = False) -> Journal:
    from vibesys.journal_schema import journal_path, open_journal

    return open_journal(journal_path(journal), readonly=readonly)


def make_engine(journal: Journal, patience: float = 0.0, **settings: Any) -> Engine:
    from datetime import timedelta

    from vibesys.engine import Engine

    return Engine(journal, patience=timedelta(seconds=patience), **settings)
