"""One error boundary (`vibesys.errors.boundary`): the typed error tree, and SQLite's errors,
become one line and one exit status; every command's entry prints that line the same way."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from vibesys.errors import (
    CommandFailed,
    ConfigError,
    JournalFault,
    UsageError,
    boundary,
    failure,
)

PACKAGE = Path(__file__).parent.parent / "vibesys"
#: Files that may write an error line themselves: the stdlib-only clients mounted into a
#: container, which cannot import vibesys.
OWN_LINES = {"broker/client.py", "bridge/client.py"}


def test_ours_is_one_line_and_status_2() -> None:
    for exc in (UsageError("no such invocation x"), ConfigError("slurm.toml: bad key")):
        failed = failure(exc)
        assert failed is not None
        assert (failed.line, failed.status) == (f"vibesys: error: {exc}", 2)


def test_a_journal_that_failed_under_a_write_is_73_and_says_the_way_out() -> None:
    full = failure(JournalFault("the journal j cannot be written: disk full"))
    gone = failure(JournalFault("the journal j was deleted", replaced=True))
    assert full is not None and gone is not None
    assert (full.status, gone.status) == (73, 73)
    assert str(full).endswith("; fix the disk, then run `vibesys reconcile`")
    assert str(gone).endswith("; put the journal back, then run `vibesys reconcile`")


def test_sqlites_error_names_the_journal(tmp_path: Path) -> None:
    failed = failure(sqlite3.DatabaseError("file is not a database"), tmp_path / "j.db")
    assert failed is not None and failed.status == 2 and str(tmp_path / "j.db") in str(failed)


def test_anything_else_passes_unchanged() -> None:
    assert failure(ValueError("a bug")) is None
    with pytest.raises(ValueError, match="a bug"), boundary():
        raise ValueError("a bug")
    said = CommandFailed("already said", 1)
    with pytest.raises(CommandFailed) as caught, boundary():
        raise said
    assert caught.value is said


def test_the_boundary_raises_what_failure_says() -> None:
    with pytest.raises(CommandFailed) as caught, boundary():
        raise UsageError("--x: bad")
    assert (caught.value.line, caught.value.status) == ("vibesys: error: --x: bad", 2)


def test_the_error_line_is_written_in_one_place() -> None:
    """Every other module ends a command through CommandFailed, never its own line."""
    writers = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if any(
            'f"vibesys: error:' in line or '"vibesys: error: ' in line
            for line in path.read_text(encoding="utf-8").splitlines()
        )
    )
    assert set(writers) - OWN_LINES == {"errors.py"}
