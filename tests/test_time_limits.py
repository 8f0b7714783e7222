"""Every test has a time limit (pytest-timeout, signal method), and a hang is a named failure.

Each case runs pytest in a subprocess on a small test file that hangs in a chosen way, with this
project's settings and tests/conftest.py (whose marker limits and backstop are under test).
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

from tests.helpers.paths import ROOT
from tests.helpers.time_limits import MARKER_TIMEOUTS

HANGS = """
import subprocess, sys, time

import pytest

from tests.helpers.time_limits import timeout_of


@pytest.mark.timeout(2)
def test_hangs_in_a_subprocess():
    subprocess.run([sys.executable, "-c", "import time; time.sleep(120)"])


@pytest.mark.timeout(2)
def test_spins():
    while True:
        pass


def test_runs_after_the_hangs():
    assert True


@pytest.mark.crash
def test_crash_limit(request):
    assert timeout_of(request.node) == {crash}


@pytest.mark.slurm
@pytest.mark.crash
def test_slurm_limit(request):
    assert timeout_of(request.node) == {slurm}


@pytest.mark.slurm
@pytest.mark.timeout(7)
def test_explicit_limit_wins(request):
    assert timeout_of(request.node) == 7


def test_default_limit(request):
    assert timeout_of(request.node) == {default}
"""

SWALLOWS = """
import time

import pytest


@pytest.mark.timeout(1)
def test_swallows_the_timeout():
    while True:
        try:
            time.sleep(0.1)
        except BaseException:
            pass


def test_never_reached():
    pass
"""


def settings() -> dict[str, object]:
    ini: dict[str, object] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"][
        "ini_options"
    ]
    return ini


def run_pytest(tmp_path: Path, source: str, *options: str) -> subprocess.CompletedProcess[str]:
    # The file sits in a fresh directory whose conftest is this suite's.
    (tmp_path / "conftest.py").write_text("from tests.conftest import *  # noqa: F403\n")
    (tmp_path / "test_subject.py").write_text(textwrap.dedent(source))
    return subprocess.run(
        [
            sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-c",
            str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT), "-v", *options,
            str(tmp_path / "test_subject.py"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip


def test_the_suite_has_a_limit_and_raises_it_in_the_test() -> None:
    ini = settings()
    assert ini["timeout_method"] == "signal"
    assert 0 < float(str(ini["timeout"])) <= 120
    assert set(MARKER_TIMEOUTS) == {"slurm", "crash"}
    assert all(float(str(ini["timeout"])) < limit for limit in MARKER_TIMEOUTS.values())


def test_a_hang_is_a_named_failure_and_the_run_goes_on(tmp_path: Path) -> None:
    source = HANGS.format(
        crash=MARKER_TIMEOUTS["crash"],
        slurm=max(MARKER_TIMEOUTS.values()),
        default=float(str(settings()["timeout"])),
    )
    done = run_pytest(tmp_path, source)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    for name in ("test_hangs_in_a_subprocess", "test_spins"):
        assert re.search(rf"^FAILED \S*::{name} - Failed: Timeout \(>2.0s\)", out, re.M), out
    assert "2 failed, 5 passed" in out, out


def test_a_test_that_swallows_its_timeout_is_stopped_with_a_stack_dump(tmp_path: Path) -> None:
    done = run_pytest(tmp_path, SWALLOWS, "-o", "hang_backstop_grace=1")
    assert done.returncode != 0
    assert "test_never_reached" not in done.stdout  # the whole run stopped
    assert "Timeout" in done.stderr, done.stderr
    assert "in test_swallows_the_timeout" in done.stderr, done.stderr
