"""What `vibesys run` does once typer has parsed its arguments: check them, record the
invocation, drive it, report; and what the followers (`wait`, `logs --follow`) share with it:
interrupts, the job's output, the final report."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from vibesys.adapters.registry import entry
from vibesys.cli.common import journal_failed, open_store
from vibesys.cli.live import LiveStatus
from vibesys.cli.read import echo
from vibesys.cli.render import stopped_line, summary
from vibesys.cli.run_checks import CheckedRun, check_failpoints, check_run
from vibesys.engine import DriveOptions, StopFlag
from vibesys.errors import (
    CommandFailed,
    JournalError,
    JournalFault,
    StaleState,
    VibesysError,
    failure,
)
from vibesys.invocation import submission
from vibesys.invocation.driver import Driver
from vibesys.invocation.journals import JournalAccess
from vibesys.journal_schema import Invocation, Journal
from vibesys.journal_schema.views import show_json
from vibesys.osutil.logtail import LogTail
from vibesys.osutil.proc import note_caller_disposition
from vibesys.osutil.start_slots import release_slot, take_slot
from vibesys.states.events import timed_out
from vibesys.states.exits import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_JOURNAL_FAULT,
    EXIT_OUTPUT_FAILED,
    exit_status,
)

__all__ = ["JsonRecord", "execute_run"]

#: What `--json` prints once the invocation ends: its record (`run_json.py`'s and `wait`'s
#: carry its JobResult, a pydantic model, which no other `run` loads).
JsonRecord = Callable[[Journal, Invocation], dict[str, Any]]


def execute_run(values: Mapping[str, Any], json_record: JsonRecord | None = None) -> int:
    """Run COMMAND as a durable invocation; its exit status (the contract in `states/exits.py`).
    Bad input is one `vibesys: error:` line and status 2, with nothing recorded. A journal
    that fails once the invocation is being recorded is one line and status 73: the job may
    be running, and the line says which and the way out. `--json` prints `json_record`."""
    if values["as_json"] and json_record is None:
        raise ValueError("run --json prints a record: give json_record (vibesys.cli.run_json)")
    take_slot()  # a burst of runs on one host starts a few at a time
    recorded: str | None = None
    store: Journal | None = None
    replaced = False
    try:
        live = live_status(values["as_json"] or values["detach"])
        # From here on an interrupt only asks to stop: before anything is recorded nothing is;
        # once the invocation is recorded, the driver cancels it (never left for reconcile).
        with interruptible() as interrupt:
            checked = _check(values)
            store = open_store(values["journal"])
            if interrupt.is_set():
                return EXIT_INTERRUPTED
            submitted = submission.submit(store, checked.command, **_submission(values, checked))
            recorded = submitted.invocation_id
            driver = Driver(JournalAccess(store.path, store), recorded, submitted.timeout)
            release_slot()
            return _drive(values, store, driver, live, interrupt, json_record)
    except KeyboardInterrupt:  # a second SIGINT/SIGTERM, or one before the handler was set
        return EXIT_INTERRUPTED
    except (VibesysError, sqlite3.Error) as exc:
        failed = _failed(exc, values, store, recorded)
        echo(failed.line, err=True)
        if failed.status == EXIT_JOURNAL_FAULT:
            replaced = isinstance(exc, JournalFault) and exc.replaced
            quiet_streams()
        return failed.status
    finally:
        release_slot()
        # Closed here, not by the interpreter's teardown (the entry point skips it): the last
        # connection folds the WAL into the journal, so read-only readers see everything. Not
        # a journal that is gone from its path: its WAL's name may be another journal's now.
        if store is not None and not replaced:
            with contextlib.suppress(sqlite3.Error):
                store.close()


def _failed(
    exc: Exception, values: Mapping[str, Any], store: Journal | None, recorded: str | None
) -> CommandFailed:
    """`run`'s reading of the boundary (`vibesys.errors.failure`): until its invocation is
    being recorded every error is bad input, status 2, with nothing recorded; a journal that
    fails from then on is status 73, and the line says which invocation may be running."""
    on_journal = isinstance(exc, JournalError | sqlite3.Error) and not isinstance(exc, StaleState)
    recording = isinstance(exc, JournalFault)
    if store is None or not on_journal or (recorded is None and not recording):
        failed = failure(exc, values["journal"]) if isinstance(exc, sqlite3.Error) else None
        return failed or CommandFailed(str(exc), EXIT_BAD_INPUT)
    return CommandFailed(journal_failed(exc, recorded, store), EXIT_JOURNAL_FAULT)


def _check(values: Mapping[str, Any]) -> CheckedRun:
    """Check everything as `vibesys run` words it, writing nothing (not even a new journal)."""
    checked = check_run(values)
    if checked.after is not None:
        parent_journal = open_store(values["journal"], readonly=True)
        checked.resolve_after(parent_journal)
        parent_journal.close()
    # The cluster's connection opens on a thread while the invocation is recorded.
    _prewarm(checked)
    check_failpoints()
    return checked


def _submission(values: Mapping[str, Any], checked: CheckedRun) -> dict[str, Any]:
    """`submit`'s arguments for the checked values (the command aside): the adapter's
    options by their names (`--artifact`'s is the list `artifacts`), `--after` as given (the
    submission resolves it again, as it records it)."""
    options = {dest: value for dest, value in checked.adapter_values.items() if dest != "after"}
    if "artifact" in options:
        options["artifacts"] = options.pop("artifact")
    if checked.after is not None:
        options["after"] = checked.after
    return {
        **options,
        "adapter": checked.adapter,
        "label": values["name"],
        "cwd": checked.cwd,
        "retries": int(checked.max_retries),
        "retry_delay": checked.retry_delay,
        "unreachable_timeout": checked.unreachable_timeout,
    }


def _told(invocation_id: str) -> Callable[[str], None]:
    """Says on stderr, before any byte of the job, why the job is not submitted yet."""

    def tell(why: str) -> None:
        with contextlib.suppress(OSError):
            echo(f"vibesys: {invocation_id} is {why}", err=True)

    return tell


def _drive(
    values: Mapping[str, Any],
    store: Journal,
    driver: Driver,
    live: LiveStatus | None,
    interrupt: StopFlag,
    json_record: JsonRecord | None,
) -> int:
    """Drive the recorded invocation to its end (or, detached, until it runs), in this
    thread (the interrupt cancels it), and report."""
    if values["detach"] and not values["as_json"]:
        echo(driver.id)
    tail = None if values["detach"] else job_output(values["as_json"], live)
    options = DriveOptions(tail, values["detach"], interrupt, status=live, on_wait=_told(driver.id))
    inv = driver.drive(options, progress=live)  # its settings are the recorded ones
    if values["detach"] and inv.state in ("RUNNING", "SUBMITTING"):
        if values["as_json"]:  # one JSON object, as every --json: the record as it stands
            echo(json.dumps(show_json(store, inv), indent=2))
        return 0
    return finish(store, inv, options, json_record if values["as_json"] else None)


#: The signals a follower (`wait`, `logs --follow`) stops at: a shell that ends sends SIGHUP.
FOLLOWER_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def interruptible(
    signals: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM),
) -> Iterator[StopFlag]:
    """The first of `signals` asks for a clean stop; a second one leaves at once."""
    event = StopFlag()

    def handler(signum: int, _frame: object) -> None:
        if event.is_set():
            raise KeyboardInterrupt
        event.set(signum)

    # A signal the caller ignores stays ignored (a script's `vibesys run ... &` ignores
    # SIGINT): the caller decided this process does not hear it, and nor will its job.
    previous: dict[int, Any] = {}
    for wanted in signals:
        if signal.getsignal(wanted) != signal.SIG_IGN:
            previous[wanted] = signal.signal(wanted, handler)
            note_caller_disposition(wanted, previous[wanted])
    try:
        yield event
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def _prewarm(checked: CheckedRun) -> None:
    """Let the adapter start reaching its cluster now, if it can (an SSH connection), so that
    the round trips overlap recording the invocation. Any adapter's request is built here
    (the submission builds it again from the recorded options): a bad one is refused before
    a journal is opened."""
    request = checked.request()
    warm = getattr(entry(checked.adapter).load(), "prewarm", None)
    if callable(warm):
        warm(request)


def job_output(as_json: bool, live: LiveStatus | None) -> LogTail:
    """Where the job's bytes go, unchanged: its stdout to ours (to stderr under `--json`,
    whose object is stdout's only content), its stderr to ours."""
    tail = LogTail(sys.stderr.buffer if as_json else sys.stdout.buffer, sys.stderr.buffer)
    if live is not None:
        tail.before_write = live.clear
    return tail


def live_status(quiet: bool) -> LiveStatus | None:
    """The terminal's status line and transfer bar: only when stdout and stderr are both
    terminals and nothing asked for quiet output (`--json`, `--detach`)."""
    try:
        both = sys.stdout.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError):
        both = False
    if quiet or not both:
        return None
    return LiveStatus()


def finish(
    journal: Journal,
    inv: Invocation,
    options: DriveOptions,
    json_record: JsonRecord | None,
    stopped_by: int | None = None,
) -> int:
    """Report the ended invocation (`--json`: its `json_record`) and give `run`'s exit
    status. A follower stopped by signal `stopped_by` before the end says so and exits
    128+N."""
    history = journal.invocations.history(inv.id)
    timed = timed_out(history)
    if inv.outcome == "DEPENDENCY_FAILED":  # the row that says why, not the collection's
        history = [h for h in history if h.event in ("Finished", "ParentFailed")] or history
    lines = [summary(inv, history[-1] if history else None, timed)]
    stopped = stopped_by is not None and inv.state != "DONE"
    if stopped:
        lines = [stopped_line(inv)]
    if options.output_error is not None:
        settled = "was cancelled" if inv.outcome == "CANCELLED" else f"ended {inv.state}"
        lines.insert(0, f"vibesys: {options.output_error}; the job {settled}")
    for art in journal.progress.artifacts(inv.id):
        if art.state in ("missing", "mismatch"):
            lines.insert(0, f"vibesys: artifact {art.path}: {art.state}: {art.detail}")
    try:
        if json_record is not None and options.output_error is None:
            echo(json.dumps(json_record(journal, inv), indent=2))
        for line in lines:
            echo(line, err=True)
    except OSError:
        pass  # stderr is gone too: the journal holds everything
    quiet_streams()
    if options.output_error:
        return EXIT_OUTPUT_FAILED
    return 128 + stopped_by if stopped and stopped_by is not None else exit_status(inv, timed)


def quiet_streams() -> None:
    """After a broken output, keep Python's own flush at exit from printing a traceback."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
