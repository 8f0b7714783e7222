"""Hang guards: bounds far above any honest run and far below the failure they catch.

A test states its real property (an order of events, a process gone, a status); a guard only
turns "it never returned" into a named failure quickly, instead of the per-test timeout. No
guard is a speed assertion: speed is for `benchmarks/`.
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, TypeVar

T = TypeVar("T")


@contextmanager
def hang_guard(seconds: float, what: str) -> Iterator[None]:
    """Fail, naming `what`, if the block took more than `seconds` (it did return, though)."""
    started = time.monotonic()
    yield
    elapsed = time.monotonic() - started
    assert elapsed < seconds, f"hang guard: {what} took {elapsed:.1f} s (guard {seconds:.0f} s)"


def wait_until(
    condition: Callable[[], T], seconds: float, what: str, *, interval: float = 0.02
) -> T:
    """Poll `condition` every `interval` until it gives something true, and return that; fail
    naming `what` (what was waited for) after `seconds`."""
    deadline = time.monotonic() + seconds
    while not (found := condition()):
        assert time.monotonic() < deadline, f"hang guard: {what}: not within {seconds:g} s"
        time.sleep(interval)
    return found


def readline_within(stream: IO[str], seconds: float, what: str) -> str:
    """One line from a pipe, or a named failure if none arrives within `seconds`."""
    ready, _, _ = select.select([stream], [], [], seconds)
    assert ready, f"hang guard: {what}: no line within {seconds:.0f} s"
    return stream.readline()


def process_is_gone(pid: int) -> bool:
    """No such process, or only a zombie left to reap."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True
