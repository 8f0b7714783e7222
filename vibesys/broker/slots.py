"""`max_concurrent_jobs`: at most that many of the run's GPU jobs are submitted at once.

Commands past the cap wait first come, first served. A waiting command whose client leaves
gives up its place without ever being submitted. A slot is held from before the submission
until the job has left the scheduler, so the cap bounds what Slurm sees, not what we track.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from vibesys.broker.jobs import StopSignal
from vibesys.broker.replies import Waiting

__all__ = ["Held", "JobSlots"]

#: How often a waiting command checks whether its client is still there.
_RECHECK_SECONDS = 0.1


class Held:
    """What a command waiting for a slot gets: true once it holds one (false: it stopped while
    waiting, holding nothing). `bind` names the invocation the slot runs, once recorded (a
    run-wide line keeps it, so a dead broker's slot is given back once that one is settled)."""

    def __init__(self, acquired: bool, bind: Callable[[str], None] | None = None) -> None:
        self.acquired = acquired
        self._bind = bind

    def __bool__(self) -> bool:
        return self.acquired

    def bind(self, invocation_id: str) -> None:
        if self._bind is not None:
            self._bind(invocation_id)


class JobSlots:
    """One process's cap (the run-wide one is `run_slots.RunSlots`)."""

    def __init__(self, cap: int | None) -> None:
        if cap is not None and cap <= 0:
            raise ValueError(f"cap {cap}: must be a positive integer or None")
        self.cap = cap
        self._lock = threading.Condition()
        self._active = 0
        self._queue: deque[object] = deque()

    def carry_on(self, stop: StopSignal) -> None:
        """Nothing to carry on: one process's slots end with it."""

    @property
    def active(self) -> int:
        with self._lock:
            return self._active

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._queue)

    @contextmanager
    def slot(self, stop: StopSignal, on_wait: Callable[[Waiting], None]) -> Iterator[Held]:
        """Hold a slot for the body; yields a false `Held` (holding nothing) if `stop` was set
        while waiting. `on_wait` is called once, outside the lock, when the command has to
        wait."""
        acquired = self._acquire(stop, on_wait)
        try:
            yield Held(acquired)
        finally:
            if acquired:
                with self._lock:
                    self._active -= 1
                    self._lock.notify_all()

    def _acquire(self, stop: StopSignal, on_wait: Callable[[Waiting], None]) -> bool:
        ticket = object()
        with self._lock:
            if self.cap is None or (not self._queue and self._active < self.cap):
                self._active += 1
                return True
            waiting = Waiting(self._active, self.cap, len(self._queue))
            self._queue.append(ticket)
        on_wait(waiting)
        with self._lock:
            while True:
                if stop.is_set():
                    self._queue.remove(ticket)
                    self._lock.notify_all()
                    return False
                if self._queue[0] is ticket and self._active < self.cap:
                    self._queue.popleft()
                    self._active += 1
                    self._lock.notify_all()
                    return True
                self._lock.wait(_RECHECK_SECONDS)
