"""`vibesys run --adapter local`: nothing of the job runs once it has ended, or once
`vibesys cancel` reports it CANCELLED, however its processes detached themselves."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cli import vibesys_cli as cli
from tests.helpers.escapees import Escapees, escapees

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def leftovers() -> Iterator[Escapees]:
    made = escapees()
    yield made
    made.kill_any_left()


def test_a_run_that_ends_leaves_nothing_running(tmp_path: Path, leftovers: Escapees) -> None:
    go = tmp_path / "go"
    # The command ends once the test has seen the three run under it.
    script = leftovers.script(f"while [ ! -e {go} ]; do sleep 0.05; done")
    argv = [sys.executable, "-m", "vibesys", "run", "--adapter", "local", "--", "sh", "-c"]
    with subprocess.Popen([*argv, script], cwd=tmp_path, stdin=subprocess.DEVNULL) as run:
        try:
            leftovers.wait_started()
        finally:  # the run ends either way, so a failure here does not wait out the timeout
            go.touch()
        assert run.wait(timeout=60) == 0
    leftovers.assert_gone()


def test_a_cancelled_run_leaves_nothing_running(tmp_path: Path, leftovers: Escapees) -> None:
    argv = ("run", "--adapter", "local", "--detach", "--", "sh", "-c")
    inv = cli(*argv, leftovers.script("sleep 100"), cwd=tmp_path).stdout.strip()
    leftovers.wait_started()
    cancelled = cli("cancel", inv, cwd=tmp_path)
    assert cancelled.returncode == 0 and "CANCELLED" in cancelled.stderr, cancelled.stderr
    leftovers.assert_gone()  # CANCELLED is reported only once nothing of it runs
    assert cli("wait", inv, cwd=tmp_path).returncode == 130
