"""State diagrams rendered from the transition table (pure text; docs are generated from it)."""

from __future__ import annotations

from collections import defaultdict

from vibesys.states.job_state import INITIAL, TERMINAL, JobState
from vibesys.states.table import TRANSITIONS, dest_of, sources_of


def _labelled_edges() -> dict[tuple[str, str], list[str]]:
    labels: dict[tuple[str, str], list[str]] = defaultdict(list)
    for row in TRANSITIONS:
        for source in sources_of(row):
            dest = dest_of(row) or source
            labels[(str(source), str(dest))].append(row["trigger"])
    return labels


def mermaid() -> str:
    lines = ["stateDiagram-v2", f"    [*] --> {INITIAL}"]
    for (src, dst), triggers in _labelled_edges().items():
        lines.append(f"    {src} --> {dst}: {', '.join(triggers)}")
    lines.extend(f"    {state} --> [*]" for state in sorted(TERMINAL))
    return "\n".join(lines) + "\n"


def dot() -> str:
    lines = ["digraph vibesys {", "    rankdir=LR;", "    node [shape=box, style=rounded];"]
    for state in JobState:
        shape = ", peripheries=2" if state in TERMINAL else ""
        lines.append(f'    "{state}" [label="{state}"{shape}];')
    for (src, dst), triggers in _labelled_edges().items():
        lines.append(f'    "{src}" -> "{dst}" [label="{", ".join(triggers)}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"
