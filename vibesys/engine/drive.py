"""Driving one invocation to its end (`vibesys run`, the GPU broker), and following one
(`vibesys wait`, `vibesys logs --follow`).

Following is not owning: only the process that started an invocation for its user (`run`,
the broker for its client) turns an interrupt, or a broken output, into a cancel; `vibesys
cancel` is the other way to cancel. A follower's interrupt only stops the following. When
nobody else drives the invocation, the follower drives it meanwhile (a retry, a collection, its
logs coming home) with the settings recorded with it, and lets go of it when it stops: the next
process that looks carries on.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Protocol

from msgspec import Struct

from vibesys.engine.chains import QUEUE_PAUSE_SECONDS, carry_on_ahead
from vibesys.engine.clusters import release_if_asked
from vibesys.engine.core import Engine
from vibesys.engine.plan import follow, needs_observation
from vibesys.engine.seen import Seen
from vibesys.errors import BackendError
from vibesys.journal_schema import Invocation
from vibesys.osutil.logtail import LogTail
from vibesys.states import JobState


class StopFlag:
    """A request to stop, set from a signal handler.

    Deliberately lock-free: a handler runs between two bytecodes of the main thread, and
    `threading.Event.set()` takes a lock that the interrupted `Event.wait()` may be holding,
    which deadlocks the process for good."""

    def __init__(self) -> None:
        self._set = False
        #: the signal that set it, when one did
        self.signum: int | None = None

    def set(self, signum: int | None = None) -> None:
        self.signum = self.signum or signum
        self._set = True

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float) -> bool:
        """Sleep up to `timeout` seconds, waking within 50 ms of `set()`."""
        deadline = time.monotonic() + timeout
        while not self._set and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, 0.05))
        return self._set


class StatusSink(Protocol):
    """Hears, on every round, how the driven invocation stands and what was last seen of its
    job (a terminal's status line, `vibesys/cli/live.py`)."""

    def show(self, inv: Invocation, seen: Seen | None) -> None: ...

    def clear(self) -> None: ...


class DriveOptions(Struct):
    tail: LogTail | None = None
    detach: bool = False
    #: set from a signal handler. Owners (`run`, the broker): cancel the job, then keep
    #: driving until it has settled. Followers (`wait`, `logs --follow`): stop, leave the job
    #: alone.
    interrupt: StopFlag | None = None
    owner: bool = True
    #: set by `drive`: another process took the invocation over (a follower follows it on)
    taken_over: bool = False
    #: set by `drive`/`wait_for`: why the output stopped (a broken pipe, a full disk)
    output_error: str | None = None
    #: a live status line, when the output is a terminal
    status: StatusSink | None = None
    #: told once each time why the invocation waits before its submission (its campaign's
    #: queue: the position, who is first)
    on_wait: Callable[[str], None] | None = None


def drive(engine: Engine, invocation: Invocation, options: DriveOptions) -> Invocation:
    """Advance `invocation` until DONE, or UNRESOLVED (or COLLECTING) that waiting does not
    change within the unreachable timeout, or RUNNING with `detach`.

    The caller must hold the invocation's lease; it is renewed here and released at the end.
    """
    stop = options.interrupt or StopFlag()
    inv = invocation
    last_seen: Seen | None = None
    told: str | None = None
    carry_after = 0.0
    renewed = time.monotonic()
    #: when this driver first saw the job's fate open (unresolved, uncollected)
    open_since: float | None = None
    # Recorded with its request (a bridge evaluation's): whoever drives it enforces it.
    deadline = engine.deadline(inv.id)
    try:
        while True:
            if time.monotonic() - renewed >= engine.lease_ttl.total_seconds() / 3:
                renewed = time.monotonic()
                if not engine.hold(inv.id):
                    options.taken_over = True
                    return engine.journal.invocations.get(inv.id)
            inv = engine.journal.invocations.get(inv.id)  # picks up cancels from other processes
            # The owner's interrupt cancels the job, driven on until it has settled; a
            # follower's stops the following, and only the deadline cancels.
            stopped = stop.is_set() and not options.owner and inv.state is not JobState.DONE
            interrupt = stop.is_set() and options.owner
            inv, seen = engine.round(
                inv, deadline=deadline, interrupt=interrupt, hurry=True, only_cancel=stopped
            )
            if stopped:
                return inv
            if options.tail is not None:
                error = _pump(engine, inv, options.tail)
                if error is not None:
                    options.output_error, options.tail = error, None
                    if not options.owner:
                        return inv
                    stop.set()  # an output that broke is handled like an interrupt
            if inv.state is JobState.DONE:
                release_if_asked(engine, inv)  # recorded with it: whoever ends it releases
                return inv
            if options.detach and inv.state is JobState.RUNNING:
                return inv
            # Whether to stop driving an invocation whose fate stays open (the planner's
            # answer, from when this driver first saw it open).
            answer = follow(inv, seen, open_since, time.monotonic())
            open_since = answer.open_since
            if answer.stop:
                return inv
            watching = needs_observation(inv)  # its job's status is still needed
            last_seen = seen or (last_seen if watching else None)
            if options.status is not None:
                options.status.show(inv, last_seen)
            waiting = engine.waiting.get(inv.id)
            if waiting is not None:
                if waiting != told and options.on_wait is not None:
                    options.on_wait(waiting)
                if time.monotonic() >= carry_after:
                    carry_after = time.monotonic() + carry_on_ahead(engine, inv)
            told = waiting
            _rest(engine, inv, stop, watching)
    finally:
        if options.status is not None:
            options.status.clear()
        engine.let_go(inv.id)


def _pump(engine: Engine, inv: Invocation, tail: LogTail, *, spool: bool = True) -> str | None:
    """Bring new log bytes home (only the lease holder spools) and to the terminal; the error
    text if the output broke."""
    if spool and inv.state is not JobState.DONE:
        # A lost connection only delays the logs: the offset is committed, so the next round
        # resumes where this one stopped.
        with contextlib.suppress(BackendError):
            engine.spool(inv)
    try:
        tail.pump(engine.adapters.log_paths(inv))
        if inv.state is JobState.DONE:
            tail.close()
    except OSError as exc:
        return f"the output failed ({exc.strerror or exc})"
    return None


def _rest(engine: Engine, inv: Invocation, stop: StopFlag, watching: bool) -> None:
    """Wait until the next round is worth it (`watching`: its job's status is needed), or
    less: until a stop, or until the process this one started for the job ends (srun: its
    end is then seen at once, not at the next poll)."""
    seconds = _pause(engine, inv, watching)
    ended = engine.adapters.end_signal(inv) if inv.state is JobState.RUNNING else None
    if ended is None or ended.is_set():  # ended without the proof of how: the rounds tell
        stop.wait(seconds)
        return
    deadline = time.monotonic() + seconds
    while not stop.is_set() and (left := deadline - time.monotonic()) > 0:
        if ended.wait(min(left, 0.05)):
            return


def _pause(engine: Engine, inv: Invocation, watching: bool) -> float:
    now = engine.clock()
    if inv.state is JobState.RETRYING and inv.id in engine.waiting:
        return QUEUE_PAUSE_SECONDS  # held for its parent's next job (or its backoff)
    if inv.state is JobState.RETRYING and inv.not_before:
        remaining = (inv.not_before - now).total_seconds()
        return min(max(remaining, 0.0), 1.0)
    if inv.state in (JobState.RUNNING, JobState.SUBMITTING, JobState.UNRESOLVED):
        backend = engine.adapters.backend(inv)
        shared = backend.shared_polling()
        if shared is not None and watching:
            return engine.shared.pause(inv, shared)
        age = (now - inv.updated_at).total_seconds()
        return backend.poll_interval(age)
    if inv.state is JobState.PREPARED and inv.id in engine.waiting:
        return QUEUE_PAUSE_SECONDS  # its turn comes when another evaluation ends: no hurry
    return 0.2 if inv.state is JobState.COLLECTING else 0.05


def wait_for(engine: Engine, invocation_id: str, options: DriveOptions) -> Invocation:
    """Block until the invocation ends; drive it whenever no live process does, follow it
    while one does. A follower (`owner=False`) stops at its interrupt, cancelling nothing."""
    stop = options.interrupt
    while True:
        inv = engine.journal.invocations.get(invocation_id)
        if inv.state is not JobState.DONE and engine.hold(inv.id):
            options.taken_over = False
            inv = drive(engine, inv, options)
            interrupted = stop is not None and stop.is_set()
            if not options.taken_over or interrupted or options.output_error is not None:
                return inv
            continue  # another process drives it now: follow it
        if options.tail is not None:
            options.output_error = _pump(engine, inv, options.tail, spool=False)
            if options.output_error is not None:
                return inv
        if inv.state is JobState.DONE:
            return inv
        if stop is not None and stop.wait(0.2):
            return inv
        if stop is None:
            time.sleep(0.2)
