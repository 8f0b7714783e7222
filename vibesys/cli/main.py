"""The `vibesys` entry point: refuse closed standard streams, make a Ctrl-C while the command
line loads a quiet exit, then hand the command line to the typer app (`app.py`), the one
declaration of every command. `vibesys run` runs in the process its caller started, so the job
gets the caller's own context (namespaces, cgroup, capabilities, limits, affinity, signal
dispositions)."""

from __future__ import annotations

import contextlib
import os
import sys

from vibesys.cli.interrupts import exit_quietly_when_interrupted
from vibesys.errors import EXIT_BAD_INPUT, CommandFailed


def closed_streams() -> int | None:
    """A closed stdout or stderr (`>&-`) is refused before anything runs: one line on the
    other stream (none when both are closed), status 2. Otherwise the next file vibesys opens
    (the journal) would take the closed stream's number, and output would go into it. A closed
    stdin is given /dev/null for the same reason."""
    if not _is_open(0):
        os.open(os.devnull, os.O_RDONLY)  # the lowest free number: 0
    closed = [name for fd, name in ((1, "stdout"), (2, "stderr")) if not _is_open(fd)]
    if not closed:
        return None
    if len(closed) == 1:
        other = 2 if closed == ["stdout"] else 1
        failed = CommandFailed(f"{closed[0]} is closed; vibesys needs it for its output")
        with contextlib.suppress(OSError):
            os.write(other, (failed.line + "\n").encode())
    return EXIT_BAD_INPUT


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def main() -> None:
    exit_quietly_when_interrupted()
    status = closed_streams()
    if status is not None:
        sys.exit(status)
    # The one import in a function here: the handler above must be in place before the
    # command line's modules load, so a Ctrl-C meanwhile is a quiet exit, not a traceback.
    from vibesys.cli.app import main as app_main

    app_main()
