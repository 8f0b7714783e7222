"""The `vibesys` command: parse, call the engine, render. Heavy modules are imported inside the
commands, so `vibesys --help` loads no adapter. The read-only commands live in `read.py`:
the entry point (`main.py`) runs them without this app, so they load not even typer."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from vibesys.bridge.cli import session_app
from vibesys.broker.cli import broker_app
from vibesys.cli import read as cli_read
from vibesys.cli.check import check_command
from vibesys.cli.clusters import clusters_app
from vibesys.cli.common import fail, journal_faults, make_engine, open_store
from vibesys.cli.run import (
    JournalOption,
    JsonOption,
    RunCommand,
    adapters_epilog,
    with_run_signature,
)
from vibesys.errors import CommandFailed, boundary

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
app.add_typer(session_app, name="session")


def run(ctx: typer.Context, **values: Any) -> None:
    """Run COMMAND as a durable invocation; exit with its status."""
    from vibesys.cli.run_command import execute_run

    raise typer.Exit(execute_run(values))


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
    """Show the candidate snapshot: its digest, and with --dry-run what goes in and what not.
    Every adapter stages `--candidate` this way (sbatch, srun, SkyPilot): this is exactly
    what would be sent."""
    with boundary():
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
    """Reattach, collect, fence, retry or mark UNRESOLVED every unfinished invocation.

    Exit 0; 4 when one is UNRESOLVED (or a row failed); 69 when one is left as it is only
    because its scheduler is unreachable within the unreachable timeout recorded with it (its
    row says until when): run it again later. --json: {"reconciled": \\[rows],
    "unresolved": \\[ids], "failed", "waiting" (how many rows), "exit_status"}."""
    with boundary():
        from vibesys.cli.render import reconcile_status, table
        from vibesys.engine import reconcile

        store = open_store(journal)
        rows = reconcile(make_engine(store))
        unresolved = [inv.id for inv in store.invocations.active() if inv.state == "UNRESOLVED"]
        failed = sum(r.failed for r in rows)
        waiting = sum(r.waiting for r in rows)
        status = reconcile_status(bool(unresolved or failed), bool(waiting))
        if as_json:
            shown = {
                "reconciled": [r.to_json() for r in rows],
                "unresolved": unresolved,
                "failed": failed,
                "waiting": waiting,
                "exit_status": status,
            }
            typer.echo(json.dumps(shown, indent=2))
        elif rows:
            headers = ("INVOCATION", "BEFORE", "AFTER", "EVIDENCE")
            typer.echo(
                table(headers, [(r.invocation_id, r.before, r.after, r.evidence) for r in rows])
            )
        else:
            typer.echo("nothing to reconcile")
        raise typer.Exit(status)


@journal_app.command("show")
def journal_show(
    invocation: Annotated[str, typer.Argument(help="An id or a unique prefix of one.")],
    journal: JournalOption = None,
    as_json: JsonOption = False,
) -> None:
    """The whole history of one invocation."""
    with boundary():
        cli_read.journal_show(journal, invocation, as_json)


@journal_app.command("list")
def journal_list(
    journal: JournalOption = None,
    state: Annotated[str | None, typer.Option(help="Only invocations in this state.")] = None,
    as_json: JsonOption = False,
) -> None:
    """One line per invocation.

    --json: {"invocations": \\[...], "count", "counts" (per state)}, each invocation as
    `journal show --json` prints it, its `history` null."""
    with boundary():
        cli_read.journal_list(journal, state, as_json)


@journal_app.command("config")
def journal_config(
    invocation: Annotated[str, typer.Argument(help="An id or a unique prefix of one.")],
    journal: JournalOption = None,
    replace: Annotated[
        Path | None,
        typer.Option(
            help="Record the site configuration in this file instead (slurm.toml, or "
            "clusters.toml for SkyPilot): its next step on uses it; the change is a history "
            "row (SiteReplaced) naming both digests and the keys that changed.",
            show_default=False,
        ),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option(
            help="With --replace, for SkyPilot: another profile of the file, which must serve "
            "the recorded [resources] \\[default: the recorded one].",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """The site configuration an invocation runs with: the rendering recorded at PREPARED
    (its digest is in `journal show`). No process reads the file again."""
    from vibesys.cli import site as cli_site

    if replace is None:
        if profile is not None:
            fail("--profile needs --replace")
        with boundary():
            cli_site.show_site(journal, invocation, as_json)
        return
    with boundary(journal):
        cli_site.replace_site(journal, invocation, replace, profile)


@journal_app.command("verify")
def journal_verify(journal: JournalOption = None) -> None:
    """Replay every history through the transition table and check integrity."""
    with boundary(journal):
        from vibesys.journal_schema import verify_journal

        store = open_store(journal, readonly=True)
        problems = verify_journal(store)
        if problems:
            fail(
                f"journal verify: {problems[0]}"
                + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
                1,
            )
        typer.echo(f"journal ok: {len(store.invocations.all_ids())} invocations verified")


@app.command()
def cancel(
    invocation: Annotated[str, typer.Argument()],
    journal: JournalOption = None,
) -> None:
    """Cancel an invocation; waits until nothing of it runs any more (UNRESOLVED, exit 4, when
    that cannot be proven within the unreachable timeout recorded with it)."""
    with boundary():
        from vibesys.cli.render import summary
        from vibesys.engine.cancel import cancel_invocation
        from vibesys.states.exits import exit_status

        store = open_store(journal)
        inv = cancel_invocation(make_engine(store), store.invocations.resolve(invocation).id)
        history = store.invocations.history(inv.id)
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

    Following never owns the job: an interrupt (SIGINT, SIGTERM, SIGHUP) only stops following,
    and nothing is cancelled."""
    if not follow:
        with boundary():
            cli_read.logs(journal, invocation)
        return
    with boundary():
        from vibesys.cli.run_command import FOLLOWER_SIGNALS, interruptible, quiet_streams
        from vibesys.engine import DriveOptions, LogTail, wait_for
        from vibesys.states.exits import EXIT_OUTPUT_FAILED

        store = open_store(journal)
        inv = store.invocations.resolve(invocation)
        engine = make_engine(store)
        tail = LogTail(sys.stdout.buffer, sys.stderr.buffer)
        with interruptible(FOLLOWER_SIGNALS) as interrupt:
            options = DriveOptions(tail=tail, interrupt=interrupt, owner=False)
            wait_for(engine, inv.id, options)
        if options.output_error is not None:
            quiet_streams()
            raise typer.Exit(EXIT_OUTPUT_FAILED)


@app.command()
def wait(
    invocation: Annotated[str, typer.Argument()],
    journal: JournalOption = None,
    as_json: JsonOption = False,
) -> None:
    """Block until the invocation ends, writing the job's output as `run` does; exit like
    `run`. Following: it never cancels.

    An interrupt (SIGINT, SIGTERM, SIGHUP) only stops waiting and cancels nothing (exit 128+N
    for signal N; the job runs on, and a later `wait` exits with its status). While nobody
    else drives it, `wait` carries it on (a retry, a collection) with the settings it was
    started with; a scheduler that stays unreachable is waited for as long as its recorded
    --unreachable-timeout allows. Only `vibesys cancel`, or an interrupt of the `run` that
    started it, cancels; and a deadline recorded with it (a bridge evaluation's timeout) is
    enforced by whoever drives it, `wait` too."""
    with boundary():
        from vibesys.cli.run_command import (
            FOLLOWER_SIGNALS,
            finish,
            interruptible,
            job_output,
            live_status,
        )
        from vibesys.engine import DriveOptions, wait_for

        store = open_store(journal)
        live = live_status(as_json)
        engine = make_engine(store, progress=live)
        target = store.invocations.resolve(invocation).id
        with interruptible(FOLLOWER_SIGNALS) as interrupt, journal_faults(store, target):
            tail = job_output(as_json, live)
            options = DriveOptions(tail, interrupt=interrupt, status=live, owner=False)
            inv = wait_for(engine, target, options)
        raise typer.Exit(finish(store, inv, options, as_json, stopped_by=interrupt.signum))


@app.command("result")
def result_command(
    invocation: Annotated[str, typer.Argument(help="An id or a unique prefix of one.")],
    journal: JournalOption = None,
    as_json: JsonOption = False,
) -> None:
    """How an invocation ended, as one typed record (JobResult): status, exit code, logs,
    artifacts, where it ran, times. Exits 1 while it has not ended."""
    with boundary(journal):
        from vibesys.job_result import NotEnded, render_result, result_from_journal

        store = open_store(journal, readonly=True)
        try:
            found = result_from_journal(store, invocation)
        except NotEnded as exc:
            fail(str(exc), 1)
        typer.echo(found.model_dump_json(indent=2) if as_json else render_result(found))


@app.command()
def states(
    fmt: Annotated[
        str, typer.Option("--format", help="mermaid, dot, or reconcile (the planner's table)")
    ] = "mermaid",
) -> None:
    """Print the state diagram, generated from the transition table (or the reconcile
    decisions, generated from the planner)."""
    with boundary():
        typer.echo(cli_read.states(fmt), nl=False)


app.command("check")(check_command)


@app.command()
def ui(
    journal: JournalOption = None,
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port on 127.0.0.1 (0: any free one).")
    ] = 0,
    open_browser: Annotated[bool, typer.Option("--open", help="Open it in a browser.")] = False,
) -> None:
    """Serve a read-only, live web view of the journal on 127.0.0.1; prints its URL (with a
    random token: a request without it is refused). Ctrl-C stops it."""
    with boundary():
        from vibesys.ui.serve import serve

        serve(journal, port, open_browser)


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
    """Run the app; a failed command or a usage error is one line (never a box or a
    traceback) and its status."""
    refresh_run_options()
    try:
        status = app(prog_name="vibesys", standalone_mode=False)
    except (typer.Abort, KeyboardInterrupt):
        status = 130
    except typer.TyperException as exc:  # a usage error (click's), in our words
        from vibesys.cli.usage import usage_line

        failed = CommandFailed(usage_line(exc), int(getattr(exc, "exit_code", 2)))
        typer.echo(failed.line, err=True)
        status = failed.status
    except CommandFailed as exc:  # every command's error, from `vibesys.errors.boundary`
        typer.echo(exc.line, err=True)
        status = exc.status
    sys.exit(status if isinstance(status, int) else 0)
