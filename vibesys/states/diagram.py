"""State diagrams rendered from the transition tables, the job's and the cluster lease's (pure
text; docs are generated from them)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from enum import StrEnum
from typing import Any

from vibesys.states.job_state import INITIAL, TERMINAL, JobState
from vibesys.states.lease_table import (
    LEASE_INITIAL,
    LEASE_TERMINAL,
    LEASE_TRANSITIONS,
    LeaseState,
)
from vibesys.states.table import TRANSITIONS


def _labelled_edges(
    table: Iterable[Mapping[str, Any]] | None = None, kind: type[StrEnum] = JobState
) -> dict[tuple[str, str], list[str]]:
    labels: dict[tuple[str, str], list[str]] = defaultdict(list)
    for row in TRANSITIONS if table is None else table:
        sources: Any = row["source"]
        for source in [sources] if isinstance(sources, str) else sources:
            dest: Any = row["dest"]
            labels[(str(kind(source)), str(kind(source if dest is None else dest)))].append(
                row["trigger"]
            )
    return labels


def _mermaid(
    table: Iterable[Mapping[str, Any]],
    kind: type[StrEnum],
    initial: StrEnum,
    terminal: Collection[StrEnum],
) -> str:
    lines = ["stateDiagram-v2", f"    [*] --> {initial}"]
    for (src, dst), triggers in _labelled_edges(table, kind).items():
        lines.append(f"    {src} --> {dst}: {', '.join(triggers)}")
    lines.extend(f"    {state} --> [*]" for state in sorted(terminal))
    return "\n".join(lines) + "\n"


def mermaid() -> str:
    """The job's state diagram."""
    return _mermaid(TRANSITIONS, JobState, INITIAL, TERMINAL)


def lease_mermaid() -> str:
    """The cluster lease's state diagram."""
    return _mermaid(LEASE_TRANSITIONS, LeaseState, LEASE_INITIAL, LEASE_TERMINAL)


def dot() -> str:
    lines = ["digraph vibesys {", "    rankdir=LR;", "    node [shape=box, style=rounded];"]
    for state in JobState:
        shape = ", peripheries=2" if state in TERMINAL else ""
        lines.append(f'    "{state}" [label="{state}"{shape}];')
    for (src, dst), triggers in _labelled_edges().items():
        lines.append(f'    "{src}" -> "{dst}" [label="{", ".join(triggers)}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"
