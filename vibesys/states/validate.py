"""Graph checks on the transition table, run when the machine is built and in the tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from vibesys.states.job_state import INITIAL, TERMINAL, JobState
from vibesys.states.table import dest_of, sources_of


class TableError(ValueError):
    """The transition table is not a well-formed machine."""


def edges(table: Iterable[Mapping[str, Any]]) -> set[tuple[JobState, JobState]]:
    """Every (source, dest) pair that changes state."""
    found: set[tuple[JobState, JobState]] = set()
    for row in table:
        dest = dest_of(row)
        if dest is not None:
            found.update((source, dest) for source in sources_of(row))
    return found


def validate_table(table: Iterable[Mapping[str, Any]]) -> None:
    rows = list(table)
    graph = edges(rows)
    triggers = [(r["trigger"], s) for r in rows for s in sources_of(r)]
    if len(triggers) != len(set(triggers)):
        raise TableError("a trigger is defined twice for the same source state")
    roots = {s for s in JobState if not any(dest == s for _, dest in graph)}
    if roots != {INITIAL}:
        raise TableError(f"expected exactly one initial state {INITIAL}, found {sorted(roots)}")
    for source, _ in graph:
        if source in TERMINAL:
            raise TableError(f"terminal state {source} has an outgoing edge")
    for row in rows:
        if row["dest"] is None and any(s in TERMINAL for s in sources_of(row)):
            raise TableError(f"terminal state accepts internal event {row['trigger']}")
    for state in JobState:
        if state in TERMINAL:
            continue
        if not any(src == state for src, _ in graph):
            raise TableError(f"{state} is a trap: it has no way out")
        if not _reaches_terminal(state, graph):
            raise TableError(f"{state} cannot reach a terminal state")


def _reaches_terminal(start: JobState, graph: set[tuple[JobState, JobState]]) -> bool:
    seen, todo = {start}, [start]
    while todo:
        here = todo.pop()
        if here in TERMINAL:
            return True
        for src, dst in graph:
            if src == here and dst not in seen:
                seen.add(dst)
                todo.append(dst)
    return False
