"""The `vibesys` entry point: make a Ctrl-C while the command line loads a quiet exit, then
hand the command line to the typer app (`app.py`), the one declaration of every command, which
first refuses closed standard streams. `vibesys run` runs in the process its caller started,
so the job gets the caller's own context (namespaces, cgroup, capabilities, limits, affinity,
signal dispositions)."""

from __future__ import annotations

from vibesys.cli.interrupts import exit_quietly_when_interrupted


def main() -> None:
    exit_quietly_when_interrupted()
    # The one import in a function here: the handler above must be in place before the
    # command line's modules load, so a Ctrl-C meanwhile is a quiet exit, not a traceback.
    from vibesys.cli.app import main as app_main

    app_main()
