"""`vibesys run` through the entry point answers as the typer app does: the same status, the
same lines, nothing recorded for bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import vibesys_cli


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--max-retries", "many", "--", "true"],
        ["run", "--adapter", "nope", "--", "true"],
        ["run", "--gpus", "1", "--", "true"],
        ["run", "--", "true"],
    ],
)
def test_the_entry_point_answers_as_the_typer_app(argv: list[str], tmp_path: Path) -> None:
    """Same status, same stderr (one line for bad input, nothing recorded), same output."""
    typer = "import sys; from vibesys.cli.app import main; sys.argv[0] = 'vibesys'; main()"
    fast_dir, slow_dir = tmp_path / "fast", tmp_path / "slow"
    fast_dir.mkdir()
    slow_dir.mkdir()
    fast = vibesys_cli(*argv, cwd=fast_dir)
    slow = subprocess.run(
        [sys.executable, "-c", typer, *argv],
        cwd=slow_dir,
        capture_output=True,
        text=True,
        check=False,
    )
    strip = str.maketrans("", "", "0123456789abcdef")  # invocation ids differ
    assert fast.returncode == slow.returncode
    assert fast.stderr.translate(strip) == slow.stderr.translate(strip)
    assert fast.stdout == slow.stdout
    assert (fast_dir / ".vibesys").exists() == (slow_dir / ".vibesys").exists()


def test_an_unknown_failpoint_is_refused_before_anything_is_recorded(tmp_path: Path) -> None:
    done = vibesys_cli(
        "run", "--", "true", cwd=tmp_path, env={"VIBESYS_FAILPOINTS": "after_nothing"}
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "vibesys: error: VIBESYS_FAILPOINTS names unknown failpoint 'after_nothing' "
        "(see vibesys debug failpoints)"
    ]
    assert not (tmp_path / ".vibesys").exists()
