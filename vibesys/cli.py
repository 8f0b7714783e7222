"""The `vibesys` command: parse, call the engine, render. Heavy modules are imported inside the
commands, so `vibesys --help` loads no adapter. The read-only commands live in `cli_read.py`:
the entry point (`cli_fast.py`) runs them without this app, so they load not even typer."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from vibesys import cli_read
from vibesys.broker.cli import broker_app
from vibesys.cli_clusters import clusters_app
from vibesys.cli_common import clean_errors, fail, make_engine, open_store
from vibesys.cli_run import JournalOption, RunCommand, adapters_epilog, with_run_signature

if TYPE_CHECKING:
    from vibesys.engine import DriveOptions, StopFlag
    from vibesys.journal_schema import Invocation, Journal
    from vibesys.live import LiveStatus

app = typer.Typer(
    name="vibesys",
    help="Durable, explicit state machines for remote evaluation jobs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
journal_app = typer.Typer(help="Read and check the journal.", no_args_is_help=True)
debug_app = typer.Typer(help="Developer tools.", no_args_is_help=True)
app.add_typer(journal_app, name="journal")
app.add_typer(clusters_app, name="clusters")
app.add_typer(debug_app, name="debug")
app.add_typer(broker_app, name="broker")

JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
Patience = Annotated[
    float, typer.Option(help="Seconds an unreachable scheduler (or open outcome) is waited for.")
]


def _show_json(journal: Journal, inv: Invocation) -> dict[str, Any]:
    return cli_read.show_json(journal, inv)


@contextmanager
def _read_command() -> Iterator[None]:
    """A read-only command's failure: one line, its exit status."""
    try:
        yield
    except cli_read.CommandFailed as exc:
        fail(str(exc), exc.status)


@contextmanager
def _interruptible() -> Iterator[StopFlag]:
    """First SIGINT/SIGTERM asks for a clean stop; a second one leaves at once."""
    from vibesys.engine import StopFlag

    event = StopFlag()

    def handler(signum: int, _frame: object) -> None:
        if event.is_set():
            raise KeyboardInterrupt
        event.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield event
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def _prewarm(adapter: str, request: Any) -> None:
    """Let the adapter start reaching its cluster now, if it can (an SSH connection), so that
    the round trips overlap recording the invocation."""
    from vibesys.adapters.registry import entry

    warm = getattr(entry(adapter).load(), "prewarm", None)
    if callable(warm):
        warm(request)


def _live_status(quiet: bool) -> LiveStatus | None:
    """The terminal's status line and transfer bar: only when stdout and stderr are both
    terminals and nothing asked for quiet output (`--json`, `--detach`)."""
    try:
        both = sys.stdout.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError):
        both = False
    if quiet or not both:
        return None
    from vibesys.live import LiveStatus

    return LiveStatus()


def _finish(journal: Journal, inv: Invocation, options: DriveOptions, as_json: bool) -> NoReturn:
    from vibesys.render import EXIT_OUTPUT_FAILED, exit_status, summary

    last = journal.history(inv.id)[-1:] or None
    lines = [summary(inv, last[0] if last else None)]
    if options.output_error is not None:
        settled = "was cancelled" if inv.outcome == "CANCELLED" else f"ended {inv.state}"
        lines.insert(0, f"vibesys: {options.output_error}; the job {settled}")
    for art in journal.artifacts(inv.id):
        if art.state in ("missing", "mismatch"):
            lines.insert(0, f"vibesys: artifact {art.path}: {art.state}: {art.detail}")
    try:
        if as_json and options.output_error is None:
            typer.echo(json.dumps(_show_json(journal, inv), indent=2))
        for line in lines:
            typer.echo(line, err=True)
    except OSError:
        pass  # stderr is gone too: the journal holds everything
    _quiet_streams()
    raise typer.Exit(EXIT_OUTPUT_FAILED if options.output_error else exit_status(inv))


def _quiet_streams() -> None:
    """After a broken output, keep Python's own flush at exit from printing a traceback."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())


def run(ctx: typer.Context, **values: Any) -> None:
    """Run COMMAND as a durable invocation; exit with its status."""
    from vibesys.run_checks import check_run

    with clean_errors():
        checked = check_run(ctx, values)
        from vibesys.engine import DriveOptions, LogTail, RetryPolicy, drive

        if checked.after is not None:
            # Resolved read-only: a bad --after writes nothing, not even a new journal.
            parent_journal = open_store(values["journal"], readonly=True)
            checked.resolve_after(parent_journal)
            parent_journal.close()
        request = checked.request()
        _prewarm(checked.adapter, request)
        store = open_store(values["journal"])
        live = _live_status(values["as_json"] or values["detach"])
        engine = make_engine(
            store,
            checked.patience,
            retry=RetryPolicy(checked.max_retries, checked.retry_delay),
            progress=live,
        )
        inv = engine.prepare(
            adapter=checked.adapter,
            command=checked.command,
            request=request,
            label=values["name"],
            cwd=checked.cwd,
        )
        if values["detach"]:
            typer.echo(inv.id)
        sink = sys.stderr.buffer if values["as_json"] else sys.stdout.buffer
        tail = None if values["detach"] else LogTail(sink, sys.stderr.buffer)
        if tail is not None and live is not None:
            tail.before_write = live.clear
        with _interruptible() as interrupt:
            options = DriveOptions(tail, values["detach"], interrupt, status=live)
            inv = drive(engine, inv, options)
        if values["detach"] and inv.state in ("RUNNING", "SUBMITTING"):
            raise typer.Exit(0)
        _finish(store, inv, options, values["as_json"])


app.command(
    "run",
    cls=RunCommand,
    context_settings={"allow_interspersed_args": False},
    epilog=adapters_epilog(),
)(with_run_signature(run))


@app.command()
def snapshot(
    directory: Annotated[Path, typer.Argument(help="The candidate directory.")] = Path("."),
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List every file and why.")] = False,
    exclude: Annotated[
        list[str] | None, typer.Option(help="Extra exclusion pattern (repeatable).")
    ] = None,
) -> None:
    """Show the candidate snapshot: its digest, and with --dry-run what goes in and what not."""
    with clean_errors():
        from vibesys.snapshot import SnapshotPolicy, build_manifest, render_manifest_text

        if not directory.is_dir():
            fail(f"candidate {directory} is not a directory")
        manifest = build_manifest(directory, SnapshotPolicy(exclude=tuple(exclude or ())))
        if dry_run:
            typer.echo(render_manifest_text(manifest), nl=False)
        else:
            typer.echo(f"sha256:{manifest.digest}")


@app.command("reconcile")
def reconcile_command(journal: JournalOption = None, as_json: JsonOption = False) -> None:
    """Reattach, collect, fence, retry or mark UNRESOLVED every unfinished invocation."""
    with clean_errors():
        from vibesys.engine import reconcile
        from vibesys.render import table

        store = open_store(journal)
        rows = reconcile(make_engine(store))
        if as_json:
            typer.echo(json.dumps([r.to_json() for r in rows], indent=2))
        elif rows:
            headers = ("INVOCATION", "BEFORE", "AFTER", "EVIDENCE")
            typer.echo(
                table(headers, [(r.invocation_id, r.before, r.after, r.evidence) for r in rows])
            )
        else:
            typer.echo("nothing to reconcile")
        unresolved = [inv for inv in store.active() if inv.state == "UNRESOLVED"]
        raise typer.Exit(4 if unresolved or any(r.failed for r in rows) else 0)


@journal_app.command("show")
def journal_show(
    invocation: Annotated[str, typer.Argument(help="An id or a unique prefix of one.")],
    journal: JournalOption = None,
    as_json: JsonOption = False,
) -> None:
    """The whole history of one invocation."""
    with _read_command():
        cli_read.journal_show(journal, invocation, as_json)


@journal_app.command("list")
def journal_list(
    journal: JournalOption = None,
    state: Annotated[str | None, typer.Option(help="Only invocations in this state.")] = None,
    as_json: JsonOption = False,
) -> None:
    """One line per invocation."""
    with _read_command():
        cli_read.journal_list(journal, state, as_json)


@journal_app.command("verify")
def journal_verify(journal: JournalOption = None) -> None:
    """Replay every history through the transition table and check integrity."""
    with clean_errors(journal):
        from vibesys.journal_schema import verify_journal

        store = open_store(journal, readonly=True)
        problems = verify_journal(store)
        if problems:
            fail(
                f"journal verify: {problems[0]}"
                + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
                1,
            )
        typer.echo(f"journal ok: {len(store.all_ids())} invocations verified")


@app.command()
def cancel(
    invocation: Annotated[str, typer.Argument()],
    journal: JournalOption = None,
    unreachable_timeout: Patience = 600.0,
) -> None:
    """Cancel an invocation; waits until nothing of it runs any more (UNRESOLVED, exit 4, when
    that cannot be proven)."""
    with clean_errors():
        from vibesys.engine.cancel import cancel_invocation
        from vibesys.render import exit_status, summary

        store = open_store(journal)
        inv = cancel_invocation(
            make_engine(store, unreachable_timeout), store.resolve(invocation).id
        )
        history = store.history(inv.id)
        typer.echo(summary(inv, history[-1] if history else None), err=True)
        if inv.state == "UNRESOLVED":
            raise typer.Exit(exit_status(inv))


@app.command()
def logs(
    invocation: Annotated[str, typer.Argument()],
    journal: JournalOption = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Until it ends.")] = False,
) -> None:
    """Print the job's output (stdout, then stderr); --follow streams it until the end.
    Following never owns the job: Ctrl-C only stops following."""
    if not follow:
        with _read_command():
            cli_read.logs(journal, invocation)
        return
    with clean_errors():
        from vibesys.engine import DriveOptions, LogTail, wait_for

        store = open_store(journal)
        inv = store.resolve(invocation)
        engine = make_engine(store, 600.0)
        tail = LogTail(sys.stdout.buffer, sys.stderr.buffer)
        with _interruptible() as interrupt:
            options = DriveOptions(tail=tail, interrupt=interrupt, owner=False)
            wait_for(engine, inv.id, options)
        if options.output_error is not None:
            _quiet_streams()
            raise typer.Exit(74)


@app.command()
def wait(
    invocation: Annotated[str, typer.Argument()],
    journal: JournalOption = None,
    as_json: JsonOption = False,
    unreachable_timeout: Patience = 600.0,
) -> None:
    """Block until the invocation ends; exit like `run`. Ctrl-C cancels it, as for `run`."""
    with clean_errors():
        from vibesys.engine import DriveOptions, wait_for

        store = open_store(journal)
        live = _live_status(as_json)
        engine = make_engine(store, unreachable_timeout, progress=live)
        with _interruptible() as interrupt:
            options = DriveOptions(interrupt=interrupt, status=live)
            inv = wait_for(engine, store.resolve(invocation).id, options)
        _finish(store, inv, options, as_json)


@app.command()
def states(
    fmt: Annotated[
        str, typer.Option("--format", help="mermaid, dot, or reconcile (the planner's table)")
    ] = "mermaid",
) -> None:
    """Print the state diagram, generated from the transition table (or the reconcile
    decisions, generated from the planner)."""
    with _read_command():
        typer.echo(cli_read.states(fmt), nl=False)


@debug_app.command("failpoints")
def debug_failpoints() -> None:
    """List the named failpoints (set VIBESYS_FAILPOINTS=name[,name...] to crash there)."""
    from vibesys.engine.failpoints import FAILPOINTS

    for name in FAILPOINTS:
        typer.echo(name)


def refresh_run_options() -> None:
    """Rebuild `run`'s options and adapter list from the registry (after one is registered)."""
    with_run_signature(run)
    for info in app.registered_commands:
        if info.name == "run":
            info.epilog = adapters_epilog()


def main() -> None:
    """Run the app; a usage error is one line (never a box or a traceback), exit 2."""
    refresh_run_options()
    try:
        status = app(prog_name="vibesys", standalone_mode=False)
    except (typer.Abort, KeyboardInterrupt):
        status = 130
    except typer.TyperException as exc:
        format_message = getattr(exc, "format_message", None)
        message = format_message() if callable(format_message) else str(exc)
        typer.echo(f"vibesys: error: {' '.join(message.split())}", err=True)
        status = int(getattr(exc, "exit_code", 2))
    sys.exit(status if isinstance(status, int) else 0)
