"""`vibesys run`'s start-up slots (vibesys/osutil/start_slots.py): a lone run takes one at
once, a run finding every slot taken waits until one is freed (by a release or by its holder's
death) or gives up waiting after WAIT_SECONDS, and a run holds at most one."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from vibesys.osutil import start_slots

#: A process that takes a slot, says so, and keeps it until killed or told to release it.
HOLDER = """
import sys, time
from vibesys.osutil import start_slots
start_slots._cpus = lambda: 2
start_slots.take_slot()
print("held" if start_slots._held is not None else "none", flush=True)
sys.stdin.readline()
start_slots.release_slot()
print("released", flush=True)
time.sleep(60)
"""


@pytest.fixture
def slots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Two slots in a private directory of the test's own, none held by this process."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setattr(start_slots, "_cpus", lambda: 2)
    monkeypatch.setattr(start_slots, "_held", None)
    yield tmp_path / f"vibesys-{os.getuid()}"
    start_slots.release_slot()


def holder(tmp_path: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "held\n"
    return proc


def stop(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.communicate()


def locked(directory: Path) -> list[bool]:
    """Which of the two slot files someone holds."""
    taken = []
    for index in range(2):
        fd = os.open(directory / f"start-slot-{index}", os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            taken.append(False)
        except BlockingIOError:
            taken.append(True)
        finally:
            os.close(fd)
    return taken


def test_a_lone_run_takes_a_slot_at_once_and_only_one(slots: Path) -> None:
    started = time.monotonic()
    start_slots.take_slot()
    start_slots.take_slot()
    assert time.monotonic() - started < 0.5
    assert sorted(locked(slots)) == [False, True]
    assert oct(slots.stat().st_mode & 0o777) == "0o700"
    start_slots.release_slot()
    assert locked(slots) == [False, False]


def test_a_run_waits_for_a_freed_slot(slots: Path, tmp_path: Path) -> None:
    first, second = holder(tmp_path), holder(tmp_path)
    try:
        assert locked(slots) == [True, True]
        assert first.stdin is not None and first.stdout is not None
        started = time.monotonic()
        first.stdin.write("\n")
        first.stdin.flush()
        time.sleep(0.3)
        start_slots.take_slot()
        waited = time.monotonic() - started
        assert first.stdout.readline() == "released\n"
        assert start_slots._held is not None
        assert 0.3 <= waited < start_slots.WAIT_SECONDS
        start_slots.release_slot()
        stop(second)
    finally:
        for proc in (first, second):
            stop(proc)
    assert locked(slots) == [False, False], "a dead holder's slot is free"


def test_a_run_starts_anyway_when_no_slot_frees(
    slots: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(start_slots, "WAIT_SECONDS", 0.5)
    procs = [holder(tmp_path), holder(tmp_path)]
    try:
        started = time.monotonic()
        start_slots.take_slot()
        waited = time.monotonic() - started
        assert start_slots._held is None
        assert 0.5 <= waited < 2.0
    finally:
        for proc in procs:
            stop(proc)
