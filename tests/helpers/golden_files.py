"""Golden files: the one way a test compares a rendering with a file under tests/golden/.

`assert_matches_golden(path, actual)` passes when the file holds exactly `actual`. Otherwise
the test fails with a unified diff and the command that regenerates the file.

With `VIBESYS_UPDATE_GOLDEN=1` a file that differs is rewritten (atomically: a temporary file
in the same directory, fsynced, then renamed over it) and the test still FAILS, so that a
regeneration never passes silently: review `git diff tests/golden`, then run again without the
variable. A file that already matches is left alone and the test passes. When `CI` is set the
update is refused: CI compares, it never writes.
"""

from __future__ import annotations

import difflib
import os
import tempfile
from pathlib import Path

import pytest

UPDATE_VARIABLE = "VIBESYS_UPDATE_GOLDEN"
CHECKOUT = Path(__file__).resolve().parents[2]


def assert_matches_golden(path: Path, actual: str) -> None:
    expected = path.read_bytes().decode("utf-8") if path.exists() else None
    if expected == actual:
        return
    diff = unified_diff(path, expected, actual)
    if os.environ.get(UPDATE_VARIABLE) == "1":
        if os.environ.get("CI"):
            pytest.fail(
                f"{UPDATE_VARIABLE}=1 under CI: refusing to write {path.name}; CI only compares."
                f"\n{diff}",
                pytrace=False,
            )
        write_atomically(path, actual)
        pytest.fail(
            f"wrote {path} (it differed, shown below). Review the change (git diff "
            f"{shown(path)}), then run again without {UPDATE_VARIABLE}.\n{diff}",
            pytrace=False,
        )
    what = "is missing" if expected is None else "differs from what the code produces"
    pytest.fail(
        f"golden file {path} {what}:\n{diff}\n"
        f"If the change is intended, regenerate it and review the diff:\n"
        f"    {regenerate_command()}",
        pytrace=False,
    )


def shown(path: Path) -> str:
    resolved = path.resolve()
    return str(resolved.relative_to(CHECKOUT) if resolved.is_relative_to(CHECKOUT) else path)


def unified_diff(path: Path, expected: str | None, actual: str) -> str:
    return "".join(
        difflib.unified_diff(
            (expected or "").splitlines(keepends=True),
            actual.splitlines(keepends=True),
            fromfile=f"{path.name} (golden)",
            tofile=f"{path.name} (actual)",
        )
    )


def regenerate_command() -> str:
    """The command that reruns the current test with updates on."""
    current = os.environ.get("PYTEST_CURRENT_TEST", "")
    node = current.rsplit(" (", 1)[0] or "tests"
    return f"{UPDATE_VARIABLE}=1 .venv/bin/pytest '{node}'"


def write_atomically(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never a part: write a sibling, then rename."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes it 0600; a golden file is an ordinary checked-in file.
        os.fchmod(handle, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
