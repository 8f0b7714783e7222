"""The `vibesys` command: parse, call the engine, render. Heavy modules are imported inside the
commands, so `vibesys --help` and `journal show` load no adapter."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from vibesys.broker.cli import broker_app
from vibesys.errors import VibesysError

if TYPE_CHECKING:
    from vibesys.engine import Engine
    from vibesys.engine.drive import StopFlag
    from vibesys.journal_schema import Invocation, Journal

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
app.add_typer(debug_app, name="debug")
app.add_typer(broker_app, name="broker")

JournalOption = Annotated[
    Path | None,
    typer.Option(
        "--journal",
        envvar="VIBESYS_JOURNAL",
        help="Journal file \\[default: .vibesys/journal.db]",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def fail(message: str, status: int = 2) -> NoReturn:
    typer.echo(f"vibesys: error: {message}", err=True)
    raise typer.Exit(status)


@contextmanager
def clean_errors() -> Iterator[None]:
    """Our errors become one line and exit status 2, never a traceback."""
    try:
        yield
    except VibesysError as exc:
        fail(str(exc))


def _open(journal: Path | None, *, readonly: bool = False) -> Journal:
    from vibesys.journal_schema import journal_path, open_journal

    return open_journal(journal_path(journal), readonly=readonly)


def _engine(journal: Journal, **settings: Any) -> Engine:
    from vibesys.adapters import get_backend
    from vibesys.engine import Engine

    return Engine(journal, get_backend, **settings)


def _show_json(journal: Journal, inv: Invocation) -> dict[str, Any]:
    shown = inv.to_json(journal.attempts(inv.id), journal.history(inv.id))
    shown["artifacts"] = [a.to_json() for a in journal.artifacts(inv.id)]
    return shown


@contextmanager
def _interruptible() -> Iterator[StopFlag]:
    """First SIGINT/SIGTERM asks for a clean cancel; a second one leaves at once."""
    from vibesys.engine.drive import StopFlag

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


def _finish(journal: Journal, inv: Invocation, as_json: bool) -> NoReturn:
    from vibesys.render import exit_status, summary

    if as_json:
        typer.echo(json.dumps(_show_json(journal, inv), indent=2))
    else:
        for art in journal.artifacts(inv.id):
            if art.state in ("missing", "mismatch"):
                typer.echo(f"vibesys: artifact {art.path}: {art.state}: {art.detail}", err=True)
        typer.echo(summary(inv), err=True)
    raise typer.Exit(exit_status(inv))


@app.command(context_settings={"allow_interspersed_args": False})
def run(
    command: Annotated[list[str] | None, typer.Argument(help="The command, after --.")] = None,
    journal: JournalOption = None,
    adapter: Annotated[str, typer.Option(help="Where the job runs.")] = "local",
    name: Annotated[str | None, typer.Option("--name", help="A label for people.")] = None,
    max_retries: Annotated[int, typer.Option(help="Retries after infrastructure failures.")] = 2,
    retry_delay: Annotated[float, typer.Option(help="Seconds before the first retry.")] = 2.0,
    detach: Annotated[bool, typer.Option(help="Return once the job runs.")] = False,
    as_json: JsonOption = False,
    slurm_config: Annotated[
        Path | None,
        typer.Option(
            help="Site configuration for sbatch/srun \\[default: ~/.config/vibesys/slurm.toml]",
            show_default=False,
        ),
    ] = None,
    gpus: Annotated[int | None, typer.Option(help="GPUs (sbatch/srun).")] = None,
    time_minutes: Annotated[
        int | None, typer.Option("--time", help="Time limit in minutes (sbatch/srun).")
    ] = None,
    partition: Annotated[str | None, typer.Option(help="Partition (sbatch/srun).")] = None,
    artifact: Annotated[
        list[str] | None,
        typer.Option(help="A file or glob the job leaves, to bring home (repeatable)."),
    ] = None,
    candidate: Annotated[
        Path | None,
        typer.Option(help="Directory to snapshot and run in (sbatch/srun).", show_default=False),
    ] = None,
    exclude: Annotated[
        list[str] | None, typer.Option(help="Extra snapshot exclusion pattern (repeatable).")
    ] = None,
    after: Annotated[
        str | None,
        typer.Option(help="Start once this sbatch invocation's job succeeds (afterok)."),
    ] = None,
    unreachable_timeout: Annotated[
        float, typer.Option(help="Seconds the scheduler may stay unreachable before UNRESOLVED.")
    ] = 600.0,
) -> None:
    """Run COMMAND as a durable invocation; exit with its status."""
    from vibesys.adapters import ADAPTER_NAMES
    from vibesys.engine.failpoints import ENV, validate

    if adapter not in ADAPTER_NAMES:
        fail(f"unknown adapter {adapter!r} (choose from {', '.join(ADAPTER_NAMES)})")
    if not command:
        fail("no command given; usage: vibesys run [OPTIONS] -- COMMAND [ARGS]...")
    if max_retries < 0 or retry_delay < 0:
        fail("--max-retries and --retry-delay must be >= 0")
    if unknown := validate(os.environ.get(ENV, "")):
        fail(f"{ENV} names unknown failpoint {unknown[0]!r} (see `vibesys debug failpoints`)")
    with clean_errors():
        from vibesys.cli_options import (
            adapter_options,
            artifact_options,
            dependency_options,
            snapshot_options,
        )
        from vibesys.engine import DriveOptions, LogTail, RetryPolicy, drive

        options = adapter_options(adapter, slurm_config, gpus, time_minutes, partition)
        options |= artifact_options(artifact or [])
        options |= snapshot_options(adapter, candidate, exclude or [])
        store = _open(journal)
        if after is not None:
            options |= dependency_options(store, after, adapter)
        engine = _engine(store, retry=RetryPolicy(max_retries, retry_delay))
        inv = engine.prepare(
            adapter=adapter,
            command=list(command),
            label=name,
            options=options,
            snapshot_digest=options.get("snapshot_digest"),
        )
        if detach:
            typer.echo(inv.id)
        sink = sys.stderr.buffer if as_json else sys.stdout.buffer
        tail = None if detach else LogTail(sink, sys.stderr.buffer)
        with _interruptible() as interrupt:
            settings = DriveOptions(tail, detach, interrupt, unreachable_timeout)
            inv = drive(engine, inv, settings)
        if detach and inv.state in ("RUNNING", "SUBMITTING"):
            raise typer.Exit(0)
        _finish(store, inv, as_json)


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
        from vibesys.adapters.snapshot import render_manifest_text
        from vibesys.cli_options import candidate_manifest

        manifest = candidate_manifest(directory, exclude or [])
        if dry_run:
            typer.echo(render_manifest_text(manifest), nl=False)
        else:
            typer.echo(f"sha256:{manifest.digest}")


@app.command("reconcile")
def reconcile_command(journal: JournalOption = None, as_json: JsonOption = False) -> None:
    """Reattach, collect, retry or mark UNRESOLVED every unfinished invocation."""
    with clean_errors():
        from vibesys.engine import reconcile
        from vibesys.render import table

        store = _open(journal)
        rows = reconcile(_engine(store))
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
        raise typer.Exit(4 if unresolved else 0)


@journal_app.command("show")
def journal_show(
    invocation: Annotated[str, typer.Argument(help="An id or a unique prefix of one.")],
    journal: JournalOption = None,
    as_json: JsonOption = False,
) -> None:
    """The whole history of one invocation."""
    with clean_errors():
        from vibesys.render import show

        store = _open(journal, readonly=True)
        inv = store.resolve(invocation)
        if as_json:
            typer.echo(json.dumps(_show_json(store, inv), indent=2))
        else:
            typer.echo(
                show(inv, store.attempts(inv.id), store.history(inv.id), store.artifacts(inv.id))
            )


@journal_app.command("list")
def journal_list(
    journal: JournalOption = None,
    state: Annotated[str | None, typer.Option(help="Only invocations in this state.")] = None,
    as_json: JsonOption = False,
) -> None:
    """One line per invocation."""
    with clean_errors():
        from vibesys.render import table
        from vibesys.states import JobState

        if state is not None and state.upper() not in JobState.__members__:
            fail(f"unknown state {state!r} (choose from {', '.join(JobState)})")
        store = _open(journal, readonly=True)
        invs = store.list_invocations(JobState(state.upper()) if state else None)
        if as_json:
            typer.echo(json.dumps([i.to_json(store.attempts(i.id), []) for i in invs]))
            return
        typer.echo(
            table(
                ("ID", "STATE", "OUTCOME", "EXIT", "ADAPTER", "LABEL", "COMMAND"),
                [
                    (
                        i.id,
                        i.state,
                        i.outcome or "-",
                        "-" if i.exit_code is None else str(i.exit_code),
                        i.adapter,
                        i.label or "-",
                        " ".join(i.command),
                    )
                    for i in invs
                ],
            )
        )


@journal_app.command("verify")
def journal_verify(journal: JournalOption = None) -> None:
    """Replay every history through the transition table and check integrity."""
    with clean_errors():
        from vibesys.journal_schema import verify_journal

        store = _open(journal, readonly=True)
        problems = verify_journal(store)
        if problems:
            fail(
                f"journal verify: {problems[0]}"
                + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
                1,
            )
        typer.echo(f"journal ok: {len(store.all_ids())} invocations verified")


@app.command()
def cancel(invocation: Annotated[str, typer.Argument()], journal: JournalOption = None) -> None:
    """Cancel an invocation; waits until nothing of it runs any more."""
    with clean_errors():
        from vibesys.engine.cancel import cancel_invocation

        store = _open(journal)
        inv = cancel_invocation(_engine(store), store.resolve(invocation).id)
        from vibesys.render import summary

        typer.echo(summary(inv), err=True)


@app.command()
def logs(
    invocation: Annotated[str, typer.Argument()],
    journal: JournalOption = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Until it ends.")] = False,
) -> None:
    """Print the job's output (stdout, then stderr); --follow streams it until the end."""
    with clean_errors():
        from vibesys.engine import DriveOptions, LogTail, wait_for

        store = _open(journal, readonly=not follow)
        inv = store.resolve(invocation)
        engine = _engine(store)
        tail = LogTail(sys.stdout.buffer, sys.stderr.buffer)
        if not follow:
            for paths in engine.all_log_paths(inv):
                tail.pump(paths)
            return
        with _interruptible() as interrupt:
            wait_for(engine, inv.id, DriveOptions(tail=tail, interrupt=interrupt))


@app.command()
def wait(
    invocation: Annotated[str, typer.Argument()],
    journal: JournalOption = None,
    as_json: JsonOption = False,
) -> None:
    """Block until the invocation ends; exit like `run`."""
    with clean_errors():
        from vibesys.engine import DriveOptions, wait_for

        store = _open(journal)
        engine = _engine(store)
        inv = wait_for(engine, store.resolve(invocation).id, DriveOptions())
        _finish(store, inv, as_json)


@app.command()
def states(
    fmt: Annotated[str, typer.Option("--format", help="mermaid or dot")] = "mermaid",
) -> None:
    """Print the state diagram, generated from the transition table."""
    from vibesys.states import diagram

    renderers: dict[str, Callable[[], str]] = {"mermaid": diagram.mermaid, "dot": diagram.dot}
    if fmt not in renderers:
        fail(f"unknown format {fmt!r} (choose from mermaid, dot)")
    typer.echo(renderers[fmt](), nl=False)


@debug_app.command("failpoints")
def debug_failpoints() -> None:
    """List the named failpoints (set VIBESYS_FAILPOINTS=name[,name...] to crash there)."""
    from vibesys.engine.failpoints import FAILPOINTS

    for name in FAILPOINTS:
        typer.echo(name)


def main() -> None:
    app(prog_name="vibesys")
