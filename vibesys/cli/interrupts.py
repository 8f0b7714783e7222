"""SIGINT while a command starts: until the command takes its interrupts over, a Ctrl-C ends
the process at once, quietly, 130 (nothing is done yet, so there is nothing to undo)."""

from __future__ import annotations

import os
import signal

#: `states.exits.EXIT_INTERRUPTED`: how a command a Ctrl-C ended leaves.
EXIT_INTERRUPTED = 130


def interrupted_while_starting(signum: int, frame: object) -> None:
    """SIGINT's handler until a command takes its interrupts over: nothing is done yet, so
    nothing to undo and nothing to say. Not a KeyboardInterrupt: raised in the middle of an
    import it may land in a weakref callback, whose exceptions CPython prints and drops, and
    the run goes on."""
    os._exit(EXIT_INTERRUPTED)


def exit_quietly_when_interrupted() -> None:
    """Until a command takes its interrupts over (`run`'s `interruptible`, or the other
    commands' KeyboardInterrupt: `interrupts_raise`), a Ctrl-C ends the process at once, 130.
    A caller that ignores SIGINT (or set its own handler) keeps it."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, interrupted_while_starting)


def interrupts_raise() -> None:
    """From here a Ctrl-C is a KeyboardInterrupt (typer's commands answer it), unless the
    caller ignores SIGINT."""
    if signal.getsignal(signal.SIGINT) is interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)
