"""Driving one invocation to its end (`vibesys run`, `vibesys wait`)."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from datetime import datetime

from vibesys.engine.core import Engine
from vibesys.engine.logs import LogTail
from vibesys.errors import BackendError
from vibesys.journal_schema import Invocation, utc_now
from vibesys.states import JobState

#: How long a scheduler may stay unreachable before the invocation is marked UNRESOLVED.
UNREACHABLE_SECONDS = 600.0


class StopFlag:
    """A request to stop, set from a signal handler.

    Deliberately lock-free: a handler runs between two bytecodes of the main thread, and
    `threading.Event.set()` takes a lock that the interrupted `Event.wait()` may be holding,
    which deadlocks the process for good."""

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float) -> bool:
        """Sleep up to `timeout` seconds, waking within 50 ms of `set()`."""
        deadline = time.monotonic() + timeout
        while not self._set and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, 0.05))
        return self._set


@dataclass
class DriveOptions:
    tail: LogTail | None = None
    detach: bool = False
    #: set from a signal handler: cancel the job, then keep driving until it has settled
    interrupt: StopFlag | None = None
    unreachable_seconds: float = UNREACHABLE_SECONDS


def drive(engine: Engine, invocation: Invocation, options: DriveOptions) -> Invocation:
    """Advance `invocation` until DONE or UNRESOLVED (or RUNNING, with `detach`).

    The caller must hold the invocation's lease; it is renewed here and released at the end.
    """
    stop = options.interrupt or StopFlag()
    renew_every = engine.lease_ttl.total_seconds() / 3
    renewed = time.monotonic()
    unreachable_since: float | None = None
    inv = invocation
    try:
        while True:
            if time.monotonic() - renewed >= renew_every:
                if not engine.journal.acquire_lease(inv.id, engine.owner, engine.lease_ttl):
                    return engine.journal.get(inv.id)  # someone took over; stop driving
                renewed = time.monotonic()
            inv = engine.journal.get(inv.id)  # picks up cancels from other processes
            if stop.is_set() and inv.state is not JobState.DONE:
                inv = engine.request_cancel(inv, "interrupt")
            engine.send_cancel(inv) if inv.cancel_requested else None
            observed = engine.observe(inv) if engine.needs_observation(inv) else None
            if isinstance(observed, BackendError) and inv.state is JobState.RUNNING:
                unreachable_since = unreachable_since or time.monotonic()
                if time.monotonic() - unreachable_since > options.unreachable_seconds:
                    inv = engine.mark_unknown(inv, f"unreachable: {observed.evidence}")
            else:
                unreachable_since = None
            inv = engine.advance(inv, observed)
            if options.tail is not None and inv.state is not JobState.DONE:
                _spool_quietly(engine, inv)
            if options.tail is not None:
                options.tail.pump(engine.log_paths(inv))
            if inv.state in (JobState.DONE, JobState.UNRESOLVED):
                return inv
            if options.detach and inv.state is JobState.RUNNING:
                return inv
            stop.wait(_pause(engine, inv))
    finally:
        engine.journal.release_lease(inv.id, engine.owner)


def _spool_quietly(engine: Engine, inv: Invocation) -> None:
    """Stream logs while the job runs; a lost connection only delays them (the offset is
    committed, so the next round resumes where this one stopped)."""
    with contextlib.suppress(BackendError):
        engine.spool(inv)


def _pause(engine: Engine, inv: Invocation) -> float:
    if inv.state is JobState.RETRYING and inv.not_before:
        remaining = (datetime.fromisoformat(inv.not_before) - utc_now()).total_seconds()
        return min(max(remaining, 0.0), 1.0)
    if inv.state in (JobState.RUNNING, JobState.SUBMITTING):
        age = (utc_now() - datetime.fromisoformat(inv.updated_at)).total_seconds()
        return engine.backend(inv).poll_interval(age)
    return 0.05


def wait_for(engine: Engine, invocation_id: str, options: DriveOptions) -> Invocation:
    """Block until the invocation ends; drive it if no live process does."""
    while True:
        inv = engine.journal.get(invocation_id)
        if inv.state is JobState.DONE:
            return inv
        if engine.journal.acquire_lease(inv.id, engine.owner, engine.lease_ttl):
            return drive(engine, inv, options)
        if options.interrupt is not None and options.interrupt.wait(0.2):
            return inv
        if options.interrupt is None:
            time.sleep(0.2)
