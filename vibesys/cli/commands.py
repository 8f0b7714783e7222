"""The bodies of the commands that drive or change invocations (`reconcile`, `cancel`, `wait`,
`logs --follow`, `result`, `journal verify`, `clusters`, `clusters release`): the typer app
(`app.py`) declares them and calls in here once one runs, so `--help` and the read-only
commands load no engine."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from vibesys.cli.common import fail, journal_faults, make_engine, open_store
from vibesys.cli.render import clusters_table, lease_line, reconcile_status, summary, table
from vibesys.cli.run_command import (
    FOLLOWER_SIGNALS,
    finish,
    interruptible,
    job_output,
    live_status,
    quiet_streams,
)
from vibesys.cli.run_json import json_record
from vibesys.client import Client
from vibesys.engine import DriveOptions, LogTail, reconcile
from vibesys.engine.cancel import cancel_invocation
from vibesys.engine.clusters import release_cluster
from vibesys.job_result import NotEnded, render_result
from vibesys.journal_schema import LIVE_LEASE_STATES, verify_journal
from vibesys.states.exits import EXIT_OUTPUT_FAILED, exit_status


def reconcile_all(journal: Path | None, as_json: bool) -> int:
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
        typer.echo(table(headers, [(r.invocation_id, r.before, r.after, r.evidence) for r in rows]))
    else:
        typer.echo("nothing to reconcile")
    return status


def verify(journal: Path | None) -> None:
    store = open_store(journal, readonly=True)
    problems = verify_journal(store)
    if problems:
        fail(
            f"journal verify: {problems[0]}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
            1,
        )
    typer.echo(f"journal ok: {len(store.invocations.all_ids())} invocations verified")


def cancel(journal: Path | None, invocation: str) -> int:
    store = open_store(journal)
    inv = cancel_invocation(make_engine(store), store.invocations.resolve(invocation).id)
    history = store.invocations.history(inv.id)
    typer.echo(summary(inv, history[-1] if history else None), err=True)
    return exit_status(inv) if inv.state == "UNRESOLVED" else 0


def follow_logs(journal: Path | None, invocation: str) -> int:
    store = open_store(journal)
    handle = Client(store).attach(invocation, drive=False)  # followed here, in this thread
    tail = LogTail(sys.stdout.buffer, sys.stderr.buffer)
    with interruptible(FOLLOWER_SIGNALS) as interrupt:
        options = DriveOptions(tail=tail, interrupt=interrupt, owner=False)
        handle.follow(options)
    if options.output_error is not None:
        quiet_streams()
        return EXIT_OUTPUT_FAILED
    return 0


def wait(journal: Path | None, invocation: str, as_json: bool) -> int:
    store = open_store(journal)
    live = live_status(as_json)
    handle = Client(store).attach(invocation, drive=False)  # followed here, in this thread
    with interruptible(FOLLOWER_SIGNALS) as interrupt, journal_faults(store, handle.id):
        tail = job_output(as_json, live)
        options = DriveOptions(tail, interrupt=interrupt, status=live, owner=False)
        inv = handle.follow(options, progress=live)
    record = json_record if as_json else None
    return finish(store, inv, options, record, stopped_by=interrupt.signum)


def result(journal: Path | None, invocation: str, as_json: bool) -> None:
    store = open_store(journal, readonly=True)
    try:
        # Read only: a key whose invocation was never recorded is refused, not recorded.
        found = Client(store).attach(invocation, drive=False, record_missing=False).result()
    except NotEnded as exc:
        fail(str(exc), 1)
    typer.echo(found.model_dump_json(indent=2) if as_json else render_result(found))


def list_clusters(journal: Path | None, as_json: bool, live: bool) -> None:
    store = open_store(journal, readonly=True)
    leases = store.clusters.cluster_leases(LIVE_LEASE_STATES if live else None)
    if as_json:
        shown = {"clusters": [lease.to_json() for lease in leases], "count": len(leases)}
        typer.echo(json.dumps(shown, indent=2))
    else:
        typer.echo(clusters_table(leases))


def release(journal: Path | None, cluster: str) -> None:
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
