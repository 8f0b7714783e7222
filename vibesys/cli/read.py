"""The read-only commands (`journal show`, `journal list`, `logs` without `--follow`,
`states`) and `echo`, which the other commands' bodies print with.

They import only what reading needs: sqlite3, json, the journal's read models and the pure
renderings; no pydantic, no engine, no adapter. Output goes through `echo`, which writes
what typer's echo would (the text and a newline, flushed).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vibesys.cli.render import show, table
from vibesys.errors import CommandFailed, UsageError, boundary, journal_path
from vibesys.invocation.journals import JournalAccess
from vibesys.invocation.reading import log_bytes
from vibesys.journal_schema.queue import QueuePlace
from vibesys.journal_schema.records import Invocation
from vibesys.journal_schema.store import Journal, open_journal
from vibesys.journal_schema.views import listed, show_json
from vibesys.states import diagram
from vibesys.states.job_state import JobState

#: What a command prints with: one line (or block) of text, to stdout or stderr.
Echo = Callable[..., None]


def echo(text: str, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


def open_readonly(journal: Path | None) -> Journal:
    return open_journal(journal_path(journal), readonly=True)


def journal_show(journal: Path | None, invocation: str, as_json: bool, out: Echo = echo) -> None:
    with boundary(journal):
        store = open_readonly(journal)
        inv = store.invocations.resolve(invocation)
        if as_json:
            out(json.dumps(show_json(store, inv), indent=2))
        else:
            attempts, history = (
                store.invocations.attempts(inv.id),
                store.invocations.history(inv.id),
            )
            leases = store.clusters.leases_used_by(inv.id)
            out(show(inv, attempts, history, store.progress.artifacts(inv.id), leases))
            place = store.queue.queue_place(inv.id) if inv.state == "PREPARED" else None
            if place is not None and place.ahead:
                out(f"waiting  {place.describe()}")


def _state_cell(state: str, place: QueuePlace | None) -> str:
    """A recorded invocation waiting for its campaign's turn says so, with its position."""
    return state if place is None else f"WAITING ({place.position} ahead)"


def list_json(
    store: Journal, invs: list[Invocation], waiting: dict[str, QueuePlace]
) -> dict[str, Any]:
    """`journal list --json`: one object (as every `--json`), the invocations under a key (each
    with its place in its campaign's queue while it waits), with how many there are in all
    and in each state."""
    counts = dict.fromkeys(map(str, JobState), 0)
    for inv in invs:
        counts[str(inv.state)] += 1
    return {
        "invocations": [listed(i, store, waiting.get(i.id)) for i in invs],
        "count": len(invs),
        "counts": counts,
    }


def journal_list(journal: Path | None, state: str | None, as_json: bool, out: Echo = echo) -> None:
    with boundary(journal):
        if state is not None and state.upper() not in JobState.__members__:
            raise UsageError(f"unknown state {state!r} (choose from {', '.join(JobState)})")
        store = open_readonly(journal)
        invs = store.invocations.list_invocations(JobState(state.upper()) if state else None)
        waiting = store.queue.waiting()
        if as_json:
            out(json.dumps(list_json(store, invs, waiting)))
            return
        out(
            table(
                ("ID", "STATE", "OUTCOME", "EXIT", "ADAPTER", "LABEL", "COMMAND"),
                [
                    (
                        i.id,
                        _state_cell(i.state, waiting.get(i.id)),
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


def logs(journal: Path | None, invocation: str) -> None:
    """Every attempt's output, oldest first, stdout then stderr, read from the local spool
    by `Handle.logs`'s reader (`vibesys.invocation.reading`), which loads no engine."""
    with boundary(journal):
        store = open_readonly(journal)
        journals = JournalAccess(store.path, store)
        inv = store.invocations.resolve(invocation)
        for stream, sink in (("stdout", sys.stdout.buffer), ("stderr", sys.stderr.buffer)):
            for chunk in log_bytes(journals, inv.id, stream=stream):
                sink.write(chunk)
            sink.flush()


#: `vibesys states --format` renderings that need nothing but the table.
TABLE_FORMATS = ("mermaid", "dot")


def states(fmt: str) -> str:
    """The state diagram (`mermaid`, `dot`), or the planner's reconcile table."""
    if fmt == "mermaid":
        return diagram.mermaid()
    if fmt == "dot":
        return diagram.dot()
    if fmt == "reconcile":
        from vibesys.engine.plan_table import render_markdown

        return render_markdown()
    raise CommandFailed(f"unknown format {fmt!r} (choose from mermaid, dot, reconcile)")
