"""`vibesys clusters`: the cluster leases the journal records (allocations vibesys holds
itself, such as a campaign's SkyPilot cluster), and `vibesys clusters release`. Thin: the
journal and the engine do the work; nothing heavy is imported before a command runs."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from vibesys.cli.run import JournalOption

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
    from vibesys.cli.common import open_store
    from vibesys.errors import boundary

    with boundary(journal):
        from vibesys.cli.render import clusters_table
        from vibesys.journal_schema import LIVE_LEASE_STATES

        store = open_store(journal, readonly=True)
        leases = store.clusters.cluster_leases(LIVE_LEASE_STATES if live else None)
        if as_json:
            shown = {"clusters": [lease.to_json() for lease in leases], "count": len(leases)}
            typer.echo(json.dumps(shown, indent=2))
        else:
            typer.echo(clusters_table(leases))


@clusters_app.command("release")
def release(
    ctx: typer.Context,
    cluster: Annotated[str, typer.Argument(help="A cluster name, or a lease id.")],
    journal: JournalOption = None,
) -> None:
    """End a cluster's allocation (sky down), recorded intent first.

    Refused while an invocation that ran on it is not DONE."""
    from vibesys.cli.common import fail, make_engine, open_store
    from vibesys.errors import boundary

    journal = journal or ctx.obj
    with boundary(journal):
        from vibesys.cli.render import lease_line
        from vibesys.engine.clusters import release_cluster

        store = open_store(journal)
        if cluster.isascii() and cluster.isdecimal():
            lease = store.clusters.cluster_lease(int(cluster))
        else:
            found = store.clusters.live_lease(cluster)
            if found is None:
                fail(f"no live cluster lease named {cluster} (see vibesys clusters)")
            lease = found
        released = release_cluster(make_engine(store), lease.id, "vibesys clusters release")
        typer.echo(lease_line(released))
