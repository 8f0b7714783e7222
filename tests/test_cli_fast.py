"""The entry point (vibesys/cli/main.py) hands the read-only commands to the typer app: they say
exactly what the app says, for good input and bad."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import vibesys_cli

#: The typer app itself, without the entry point.
TYPER = "import sys; from vibesys.cli.app import main; sys.argv[0] = 'vibesys'; main()"


def through_typer(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", TYPER, *args], cwd=cwd, capture_output=True, text=True, check=False
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    cwd = tmp_path_factory.mktemp("fast")
    done = vibesys_cli("run", "--name", "fast", "--", "sh", "-c", "echo out; echo err >&2", cwd=cwd)
    assert done.returncode == 0, done.stderr
    listed = json.loads(vibesys_cli("journal", "list", "--json", cwd=cwd).stdout)
    return cwd, listed["invocations"][0]["id"]


def argvs(invocation: str) -> list[list[str]]:
    return [
        ["journal", "show", invocation],
        ["journal", "show", invocation[:5], "--json"],
        ["journal", "show", "--json", invocation],
        ["journal", "list"],
        ["journal", "list", "--json"],
        ["journal", "list", "--state", "done"],
        ["journal", "list", "--state=running"],
        ["journal", "list", "--state", "bogus"],
        ["journal", "show", "ffffffffffff"],
        ["journal", "show", invocation, "--journal", "elsewhere/j.db"],
        ["logs", invocation],
        ["states"],
        ["states", "--format", "dot"],
        ["states", "--format=reconcile"],
        ["states", "--format", "nope"],
    ]


@pytest.mark.parametrize("index", range(15))
def test_the_entry_point_answers_as_the_typer_app(project: tuple[Path, str], index: int) -> None:
    cwd, invocation = project
    argv = argvs(invocation)[index]
    fast = vibesys_cli(*argv, cwd=cwd)
    slow = through_typer(*argv, cwd=cwd)
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        slow.returncode,
        slow.stdout,
        slow.stderr,
    )


def test_logs_prints_the_spool_of_every_attempt(project: tuple[Path, str]) -> None:
    cwd, invocation = project
    done = vibesys_cli("logs", invocation, cwd=cwd)
    assert (done.returncode, done.stdout, done.stderr) == (0, "out\n", "err\n")
