"""The `vibesys` command, declared once: every command's arguments and options, in typer's
terms. A command's body lives in the module it names (`read.py` for the read-only commands,
`commands.py` for those that drive invocations, `run_command.py` for `run`), loaded when the
command runs: `--help` and the read-only commands load no engine and no adapter."""

# Annotations are values here, not strings: typer reads these signatures at every start, and
# a string would be compiled and evaluated again each time.

import contextlib
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from vibesys.bridge.cli import session_app
from vibesys.broker.cli import broker_app
from vibesys.cli.check import check_command
from vibesys.cli.clusters import clusters_app
from vibesys.cli.interrupts import interrupts_raise
from vibesys.cli.run import (
    JournalOption,
    JsonOption,
    RunCommand,
    adapters_epilog,
)
from vibesys.cli.usage import usage_line
from vibesys.errors import EXIT_BAD_INPUT, CommandFailed, boundary

app = typer.Typer(
    name="vibesys",
    help="Durable, explicit state machines for remote evaluation jobs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
journal_app = typer.Typer(help="Read and check the journal.", no_args_is_help=True)
debug_app = typer.Typer(help="Developer tools.", no_args_is_help=True)


@app.callback()
def starting(ctx: typer.Context) -> None:
    # `run` keeps the quiet exit until its own handler (`interruptible`) takes over, before
    # anything is recorded; every other command answers a KeyboardInterrupt.
    if ctx.invoked_subcommand != "run":
        interrupts_raise()


app.add_typer(journal_app, name="journal")
app.add_typer(clusters_app, name="clusters")
app.add_typer(debug_app, name="debug")
app.add_typer(broker_app, name="broker")
app.add_typer(session_app, name="session")


def run(ctx: typer.Context) -> None:
    """Run COMMAND as a durable invocation; exit with its status."""
    # A repeatable option or the command given no value is None, as the checks expect.
    values = {k: (list(v) or None) if isinstance(v, tuple) else v for k, v in ctx.params.items()}
    # `--json` reports the JobResult, a pydantic model: a body of its own, the one that loads it.
    if values["as_json"]:
        from vibesys.cli.run_json import execute_run
    else:
        from vibesys.cli.run_command import execute_run
    raise typer.Exit(execute_run(values))


app.command(
    "run",
    cls=RunCommand,
    context_settings={"allow_interspersed_args": False},
    epilog=adapters_epilog(),
)(run)


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
            raise CommandFailed(f"candidate {directory} is not a directory")
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
        from vibesys.cli import commands

        raise typer.Exit(commands.reconcile_all(journal, as_json))


@journal_app.command("show")
def journal_show(
    invocation: Annotated[str, typer.Argument(help="An id or a unique prefix of one.")],
    journal: JournalOption = None,
    as_json: JsonOption = False,
) -> None:
    """The whole history of one invocation."""
    from vibesys.cli import read as cli_read

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
    from vibesys.cli import read as cli_read

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
            raise CommandFailed("--profile needs --replace")
        with boundary():
            cli_site.show_site(journal, invocation, as_json)
        return
    with boundary(journal):
        cli_site.replace_site(journal, invocation, replace, profile)


@journal_app.command("verify")
def journal_verify(journal: JournalOption = None) -> None:
    """Replay every history through the transition table and check integrity."""
    with boundary(journal):
        from vibesys.cli import commands

        commands.verify(journal)


@app.command()
def cancel(
    invocation: Annotated[str, typer.Argument()],
    journal: JournalOption = None,
) -> None:
    """Cancel an invocation; waits until nothing of it runs any more (UNRESOLVED, exit 4, when
    that cannot be proven within the unreachable timeout recorded with it)."""
    with boundary():
        from vibesys.cli import commands

        status = commands.cancel(journal, invocation)
    if status:
        raise typer.Exit(status)


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
        from vibesys.cli import read as cli_read

        with boundary():
            cli_read.logs(journal, invocation)
        return
    with boundary():
        from vibesys.cli import commands

        status = commands.follow_logs(journal, invocation)
    if status:
        raise typer.Exit(status)


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
        from vibesys.cli import commands

        raise typer.Exit(commands.wait(journal, invocation, as_json))


@app.command("result")
def result_command(
    invocation: Annotated[str, typer.Argument(help="An id or a unique prefix of one.")],
    journal: JournalOption = None,
    as_json: JsonOption = False,
) -> None:
    """How an invocation ended, as one typed record (JobResult): status, exit code, logs,
    artifacts, where it ran, times. Exits 1 while it has not ended."""
    with boundary(journal):
        from vibesys.cli import commands

        commands.result(journal, invocation, as_json)


@app.command()
def states(
    fmt: Annotated[
        str, typer.Option("--format", help="mermaid, dot, or reconcile (the planner's table)")
    ] = "mermaid",
) -> None:
    """Print the state diagram, generated from the transition table (or the reconcile
    decisions, generated from the planner)."""
    from vibesys.cli import read as cli_read

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
    """Show a newly registered adapter in `run`'s help (its options are read from the
    registry whenever the command is built)."""
    for info in app.registered_commands:
        if info.name == "run":
            info.epilog = adapters_epilog()


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
    """Run the app; a failed command or a usage error is one line (never a box or a
    traceback) and its status."""
    status = closed_streams()
    if status is not None:
        sys.exit(status)
    refresh_run_options()
    try:
        status = app(prog_name="vibesys", standalone_mode=False)
    except (typer.Abort, KeyboardInterrupt):
        status = 130
    except typer.TyperException as exc:  # a usage error (click's), in our words
        failed = CommandFailed(usage_line(exc), int(getattr(exc, "exit_code", 2)))
        typer.echo(failed.line, err=True)
        status = failed.status
    except CommandFailed as exc:  # every command's error, from `vibesys.errors.boundary`
        typer.echo(exc.line, err=True)
        status = exc.status
    sys.exit(status if isinstance(status, int) else 0)
