"""`vibesys clusters`: the cluster leases the journal records (allocations vibesys holds
itself, such as a campaign's SkyPilot cluster), and `vibesys clusters release`. Thin: the
journal and the engine do the work (`commands.py`, loaded when one runs)."""

# Annotations are values here, not strings: typer reads these signatures at every start, and
# a string would be compiled and evaluated again each time.

from typing import Annotated

import typer

from vibesys.cli.run import JournalOption
from vibesys.errors import boundary

clusters_app = typer.Typer(
    help="Cluster leases: list them (the default), or release one.",
    invoke_without_command=True,
)


@clusters_app.callback()
def clusters(
    ctx: typer.Context,
    journal: JournalOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    live: Annotated[
        bool, typer.Option("--live", help="Only leases that may hold an allocation.")
    ] = False,
) -> None:
    """List every cluster lease: name, state, allocation, profile, campaign. --json:
    {"clusters": [leases], "count"}."""
    ctx.obj = journal
    if ctx.invoked_subcommand is not None:
        return
    with boundary(journal):
        from vibesys.cli import commands

        commands.list_clusters(journal, as_json, live)


@clusters_app.command("release")
def release(
    ctx: typer.Context,
    cluster: Annotated[str, typer.Argument(help="A cluster name, or a lease id.")],
    journal: JournalOption = None,
) -> None:
    """End a cluster's allocation (sky down), recorded intent first.

    Refused while an invocation that ran on it is not DONE."""
    journal = journal or ctx.obj
    with boundary(journal):
        from vibesys.cli import commands

        commands.release(journal, cluster)
