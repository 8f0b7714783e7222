"""Process identity on Linux: a pid plus its start time, so a reused pid is never mistaken for
the process we started. Stdlib only; used by the journal's leases and the local adapter."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

#: What the caller had set for the signals this process took over (`note_caller_disposition`).
_CALLER_DISPOSITIONS: dict[int, Any] = {}


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), or None
    when there is no such process or it is a zombie (dead, waiting to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode("ascii", "replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return fields[19]


def is_alive(pid: int, started: str | None) -> bool:
    """True when `pid` runs and, if `started` is given, is the same process that started then."""
    now = start_time(pid)
    return now is not None and (started is None or now == started)


def hostname() -> str:
    return os.uname().nodename  # what gethostname() returns, without importing socket


def self_identity() -> str:
    """host:pid:start, unique for this process across pid reuse."""
    pid = os.getpid()
    return f"{hostname()}:{pid}:{start_time(pid)}"


def identity_alive(identity: str) -> bool | None:
    """Whether the process named by `self_identity()` lives; None when it is on another host."""
    host, _, rest = identity.partition(":")
    pid_text, _, started = rest.partition(":")
    if host != hostname() or not pid_text.isdigit():
        return None
    return is_alive(int(pid_text), started or None)


def group_members(pgid: int, leader_start: str | None = None) -> list[int]:
    """Live processes (zombies excluded) of process group `pgid`.

    The kernel never gives a pid to a new process while it still names a process group, so if
    the group's leader runs with a different start time than `leader_start`, the group we knew
    is gone and a new process merely reuses the number."""
    return _members(2, pgid, leader_start)


def session_members(sid: int, leader_start: str | None = None) -> list[int]:
    """Live processes of session `sid`, under the same rule as `group_members` (a pid that
    names a session is not reused either)."""
    return _members(3, sid, leader_start)


def _members(field: int, leader: int, leader_start: str | None) -> list[int]:
    if leader_start is not None:
        now = start_time(leader)
        if now is not None and now != leader_start:
            return []
    members = []
    for pid, stat in processes("stat"):
        text = stat.decode("ascii", "replace")
        fields = text[text.rindex(")") + 2 :].split()
        # After the command name: state, ppid, process group, session.
        if fields[0] not in ("Z", "X") and fields[field] == str(leader):
            members.append(pid)
    return members


def processes(what: str) -> Iterator[tuple[int, bytes]]:
    """(pid, the content of /proc/PID/`what`) of every process that can be read now."""
    # `with`: a caller that stops early (or raises) closes the listing when the generator goes.
    with os.scandir("/proc") as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/{what}", "rb") as handle:
                    content = handle.read()
            except OSError:
                continue
            yield int(entry.name), content


def note_caller_disposition(signum: int, previous: Any) -> None:
    """Remember what the caller had set for `signum` before this process handled it itself,
    so the jobs it starts get the caller's disposition, not ours."""
    _CALLER_DISPOSITIONS.setdefault(signum, previous)


def caller_ignores(signum: int) -> bool:
    """Whether the process that started us ignores `signum` (SIG_IGN is inherited by a job,
    a handler is not)."""
    return _CALLER_DISPOSITIONS.get(signum, signal.getsignal(signum)) == signal.SIG_IGN
