"""Graph checks on a transition table (the job's, the cluster lease's), run when the machine
is built, when the lease table is loaded, and in the tests."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from enum import StrEnum
from typing import Any

from vibesys.states.job_state import INITIAL, TERMINAL, JobState


class TableError(ValueError):
    """The transition table is not a well-formed machine."""


#: What a row may say: no conditions, no other callbacks (`decide()` runs a row's `after` alone).
ROW_KEYS = frozenset({"trigger", "source", "dest", "after"})


def _sources(row: Mapping[str, Any], kind: type[StrEnum]) -> list[StrEnum]:
    sources = row["source"]
    return [kind(sources)] if isinstance(sources, str) else [kind(s) for s in sources]


def _dest(row: Mapping[str, Any], kind: type[StrEnum]) -> StrEnum | None:
    return None if row["dest"] is None else kind(row["dest"])


def edges(
    table: Iterable[Mapping[str, Any]], kind: type[StrEnum] = JobState
) -> set[tuple[StrEnum, StrEnum]]:
    """Every (source, dest) pair that changes state (or stays by a named `dest`)."""
    found: set[tuple[StrEnum, StrEnum]] = set()
    for row in table:
        dest = _dest(row, kind)
        if dest is not None:
            found.update((source, dest) for source in _sources(row, kind))
    return found


def validate_table(
    table: Iterable[Mapping[str, Any]],
    kind: type[StrEnum] = JobState,
    initial: StrEnum = INITIAL,
    terminal: Collection[StrEnum] = TERMINAL,
) -> None:
    rows = list(table)
    for row in rows:
        if not ROW_KEYS.issuperset(row):
            raise TableError(f"row {row['trigger']} says {sorted(set(row) - ROW_KEYS)}")
    graph = edges(rows, kind)
    triggers = [(r["trigger"], s) for r in rows for s in _sources(r, kind)]
    if len(triggers) != len(set(triggers)):
        raise TableError("a trigger is defined twice for the same source state")
    roots = {s for s in kind if not any(dest == s and src != s for src, dest in graph)}
    if roots != {initial}:
        raise TableError(f"expected exactly one initial state {initial}, found {sorted(roots)}")
    for source, _ in graph:
        if source in terminal:
            raise TableError(f"terminal state {source} has an outgoing edge")
    for row in rows:
        if row["dest"] is None and any(s in terminal for s in _sources(row, kind)):
            raise TableError(f"terminal state accepts internal event {row['trigger']}")
    for state in kind:
        if state in terminal:
            continue
        if not any(src == state and dst != state for src, dst in graph):
            raise TableError(f"{state} is a trap: it has no way out")
        if not _reaches_terminal(state, graph, terminal):
            raise TableError(f"{state} cannot reach a terminal state")


def _reaches_terminal(
    start: StrEnum, graph: set[tuple[StrEnum, StrEnum]], terminal: Collection[StrEnum]
) -> bool:
    seen, todo = {start}, [start]
    while todo:
        here = todo.pop()
        if here in terminal:
            return True
        for src, dst in graph:
            if src == here and dst not in seen:
                seen.add(dst)
                todo.append(dst)
    return False
