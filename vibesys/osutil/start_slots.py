"""`vibesys run` records a few at a time: at most one process per CPU this one may use is between
its checks and its recorded invocation (the site's checks, the journal's first commit), the
rest wait for a slot without spending any CPU.

Why: N interpreters started together on C CPUs share them evenly, so each reaches its first
record only after about N times one start-up's CPU divided by C, and no job is submitted
before then; a few at a time, the first is recorded after one start-up and the rest follow
one by one, as one process submitting N jobs would submit them. A lone run finds a slot free
at once. The slots are `flock`s on files in this user's private directory, so a process that
dies frees its slot; one that is stopped (SIGSTOP) keeps it, and whoever waits on that slot
starts anyway after WAIT_SECONDS. Stdlib only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time

from vibesys.osutil.private_dir import private_dir

#: The longest a run waits for a slot: several start-ups under load, so that a burst still
#: starts in turn, while a slot held by a stopped process delays the next ones only this long.
WAIT_SECONDS = 3.0
#: How often a waiting run looks for a free slot again (a few syscalls each time).
RETRY_SECONDS = 0.01

_held: int | None = None


def take_slot() -> None:
    """Take one start-up slot (or give up waiting after WAIT_SECONDS; without the private
    directory, start at once). Idempotent: a process holds at most one."""
    global _held
    if _held is not None:
        return
    directory = private_dir()
    if directory is None:
        return
    count = _cpus()
    fds: list[int] = []
    try:
        for index in range(count):
            path = directory / f"start-slot-{index}"
            fds.append(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
    except OSError:
        _close(fds)
        return
    first = os.getpid() % count  # processes started together try the slots in different orders
    order = fds[first:] + fds[:first]
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        for fd in order:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            except OSError:
                break  # a file system without locks: nothing to wait for
            _held = fd
            _close([other for other in fds if other != fd])
            return
        else:
            if time.monotonic() < deadline:
                time.sleep(RETRY_SECONDS)
                continue
        _close(fds)
        return


def release_slot() -> None:
    """The start-up is over (the invocation is recorded, or the run ended before): the next
    waiting run may start."""
    global _held
    if _held is not None:
        _close([_held])
        _held = None


def _cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except OSError:
        return max(1, os.cpu_count() or 1)


def _close(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
