"""The `vibesys` entry point. The read-only commands agents call in loops (`journal show`,
`journal list`, `logs` without `--follow`, `states`) run here without the typer app: their
arguments are few and fixed, so a command line that is exactly one of them is parsed here and
the command runs with nothing but sqlite3, json and the journal's read models imported.
`vibesys run` in its plain forms is parsed here too (from the same option tables as the typer
command, `run_options.py`) and runs without typer, click or their pydantic adapters.
`vibesys run` always runs in the process its caller started, so the job gets the caller's own
context (namespaces, cgroup, capabilities, limits, affinity, signal dispositions).
Anything else (every other command, `--help`, an option or a form this parser does not know,
an error in the arguments) goes to the typer app unchanged, which answers as it always does.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import vibesys

#: Options that take a value, and flags, per fast command (the long forms typer accepts).
_VALUED = {
    ("journal", "show"): {"--journal"},
    ("journal", "list"): {"--journal", "--state"},
    ("logs",): {"--journal"},
    ("states",): {"--format"},
}
_FLAGS = {
    ("journal", "show"): {"--json"},
    ("journal", "list"): {"--json"},
    ("logs",): set(),
    ("states",): set(),
}
_POSITIONALS = {("journal", "show"): 1, ("journal", "list"): 0, ("logs",): 1, ("states",): 0}


def parse(argv: Sequence[str]) -> tuple[tuple[str, ...], dict[str, str | bool], list[str]] | None:
    """(command, options, positionals) when `argv` is plainly one fast command, else None."""
    words = list(argv)
    command: tuple[str, ...] | None = None
    for candidate in _POSITIONALS:
        if tuple(words[: len(candidate)]) == candidate:
            command = candidate
    if command is None:
        return None
    options: dict[str, str | bool] = {}
    positionals: list[str] = []
    rest = words[len(command) :]
    index = 0
    while index < len(rest):
        word = rest[index]
        index += 1
        if not word.startswith("-") or word == "-":
            positionals.append(word)
            continue
        name, equals, value = word.partition("=")
        if name in _VALUED[command]:
            if not equals:
                if index >= len(rest):
                    return None
                value = rest[index]
                index += 1
            if name in options:
                return None  # repeated: let typer decide what that means
            options[name] = value
        elif name in _FLAGS[command] and not equals:
            options[name] = True
        else:
            return None  # --help, --, an unknown option: typer's answer
    if len(positionals) != _POSITIONALS[command]:
        return None
    return command, options, positionals


def run_fast(argv: Sequence[str]) -> int | None:
    """Run `argv` if it is a fast command; its exit status, or None when typer must run it."""
    parsed = parse(argv)
    if parsed is None:
        return None
    command, options, positionals = parsed
    from vibesys.cli import read as cli_read
    from vibesys.errors import CommandFailed

    def text(name: str) -> str | None:
        value = options.get(name)
        return value if isinstance(value, str) else None

    journal_option = text("--journal")
    journal = Path(journal_option) if journal_option else None
    as_json = options.get("--json") is True
    commands: dict[tuple[str, ...], Callable[[], None]] = {
        ("journal", "show"): lambda: cli_read.journal_show(journal, positionals[0], as_json),
        ("journal", "list"): lambda: cli_read.journal_list(journal, text("--state"), as_json),
        ("logs",): lambda: cli_read.logs(journal, positionals[0]),
        ("states",): lambda: _states(text("--format") or "mermaid"),
    }
    try:
        commands[command]()
        sys.stdout.flush()
    except CommandFailed as exc:  # the boundary's answer (`vibesys.errors.boundary`)
        with contextlib.suppress(OSError):
            cli_read.echo(exc.line, err=True)
        return exc.status
    except BrokenPipeError:  # `| head`: the reader is gone; say nothing more to it
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def _states(fmt: str) -> None:
    from vibesys.cli import read as cli_read

    text = cli_read.states(fmt)
    sys.stdout.write(text)
    sys.stdout.flush()


def run_evaluation(argv: Sequence[str]) -> int | None:
    """`vibesys run ...` parsed here when its form is plain (`run_options.parse_run_argv`),
    then run without typer; None when typer must parse it."""
    if list(argv[:1]) != ["run"]:
        return None
    from vibesys.osutil.start_slots import take_slot

    take_slot()  # before the imports: a burst of runs starts a few at a time
    from vibesys.cli.run_options import parse_run_argv

    values = parse_run_argv(argv[1:])
    if values is None:
        return None
    from vibesys.cli.run_command import execute_run

    return execute_run(values)


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
        from vibesys.errors import CommandFailed

        failed = CommandFailed(f"{closed[0]} is closed; vibesys needs it for its output")
        with contextlib.suppress(OSError):
            os.write(other, (failed.line + "\n").encode())
    return 2  # states.exits.EXIT_BAD_INPUT


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def main() -> None:
    # A short-lived command allocates most of what it ever will while importing: the cycle
    # collector would only walk those objects again and again (a tenth of a run's start).
    # Whatever runs long turns it back on (`run` once the job is driven, the typer app).
    gc.disable()
    status = closed_streams()
    if status is not None:
        os._exit(status)  # nothing to flush: the streams are not there
    # Until `run` takes its interrupts over (`run_command.interruptible`, before anything is
    # recorded), or a typer command starts, a Ctrl-C ends the process at once, 130: nothing
    # is done yet, and a read-only command has nothing to undo.
    try:
        status = run_fast(sys.argv[1:])
        if status is None:
            status = run_evaluation(sys.argv[1:])
        if status is None:
            collect_again()
            from vibesys.cli.app import main as typer_main

            interrupts_raise()
            typer_main()
            return
    except KeyboardInterrupt:  # a caller's own handler, or started as a library
        status = 130  # states.exits.EXIT_INTERRUPTED, not imported here: it loads the states
    leave(status)


def interrupts_raise() -> None:
    """From here a Ctrl-C is a KeyboardInterrupt (typer's commands answer it), unless the
    caller ignores SIGINT."""
    if signal.getsignal(signal.SIGINT) is vibesys._interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def collect_again() -> None:
    """Turn the cycle collector back on, with what exists so far set aside for good."""
    gc.freeze()
    gc.enable()


def leave(status: int) -> None:
    """End the process now that everything is said and committed: flush what is written,
    run the exit handlers, and skip the interpreter's teardown of every module and object
    (a sixth of a short run's time; the journal is committed, nothing else is pending)."""
    import atexit

    if sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(status)  # a profiler or a coverage tool writes its report on the way out
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    atexit._run_exitfuncs()
    os._exit(status)
