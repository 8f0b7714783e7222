"""The mermaid and dot diagrams are the table: parse them back and compare edge for edge."""

from __future__ import annotations

import re
from collections import Counter

from vibesys.states import INITIAL, TERMINAL, JobState
from vibesys.states.diagram import dot, mermaid
from vibesys.states.table import TRANSITIONS, dest_of, sources_of

Edge = tuple[str, str, str]  # (source, dest, trigger); an internal transition is a self-loop


def table_edges() -> Counter[Edge]:
    return Counter(
        (str(src), str(dest_of(row) or src), row["trigger"])
        for row in TRANSITIONS
        for src in sources_of(row)
    )


MERMAID_EDGE = re.compile(r"^    (\w+) --> (\w+): (\w+(?:, \w+)*)$")
MERMAID_START = re.compile(r"^    \[\*\] --> (\w+)$")
MERMAID_END = re.compile(r"^    (\w+) --> \[\*\]$")


def test_mermaid_has_every_edge_of_the_table_and_nothing_else() -> None:
    text = mermaid()
    assert text.endswith("\n")
    lines = text.splitlines()
    assert lines[0] == "stateDiagram-v2"
    found: Counter[Edge] = Counter()
    starts, ends, pairs = [], [], []
    for line in lines[1:]:
        if match := MERMAID_EDGE.match(line):
            src, dst, labels = match.groups()
            pairs.append((src, dst))
            found.update((src, dst, trigger) for trigger in labels.split(", "))
        elif match := MERMAID_START.match(line):
            starts.append(match.group(1))
        elif match := MERMAID_END.match(line):
            ends.append(match.group(1))
        else:
            raise AssertionError(f"unexpected mermaid line {line!r}")
    assert found == table_edges()
    assert len(pairs) == len(set(pairs)), "one arrow per (source, dest), triggers joined"
    assert starts == [str(INITIAL)]
    assert sorted(ends) == sorted(str(s) for s in TERMINAL)
    assert {s for pair in pairs for s in pair} == {str(s) for s in JobState}


DOT_NODE = re.compile(r'^    "(\w+)" \[label="(\w+)"(, peripheries=2)?\];$')
DOT_EDGE = re.compile(r'^    "(\w+)" -> "(\w+)" \[label="(\w+(?:, \w+)*)"\];$')
DOT_HEADER = ["digraph vibesys {", "    rankdir=LR;", "    node [shape=box, style=rounded];"]


def test_dot_has_every_edge_of_the_table_and_nothing_else() -> None:
    text = dot()
    assert text.endswith("}\n")
    lines = text.splitlines()
    assert lines[:3] == DOT_HEADER
    assert lines[-1] == "}"
    nodes: dict[str, bool] = {}
    found: Counter[Edge] = Counter()
    pairs = []
    for line in lines[3:-1]:
        if match := DOT_NODE.match(line):
            name, label, double = match.groups()
            assert name == label
            assert name not in nodes, f"node {name} declared twice"
            nodes[name] = double is not None
        elif match := DOT_EDGE.match(line):
            src, dst, labels = match.groups()
            pairs.append((src, dst))
            found.update((src, dst, trigger) for trigger in labels.split(", "))
        else:
            raise AssertionError(f"unexpected dot line {line!r}")
    assert found == table_edges()
    assert len(pairs) == len(set(pairs))
    assert nodes == {str(s): s in TERMINAL for s in JobState}


def test_both_diagrams_draw_the_same_arrows() -> None:
    mermaid_pairs = {m.groups()[:2] for m in map(MERMAID_EDGE.match, mermaid().splitlines()) if m}
    dot_pairs = {m.groups()[:2] for m in map(DOT_EDGE.match, dot().splitlines()) if m}
    assert mermaid_pairs == dot_pairs
    assert len(mermaid_pairs) == len({(e[0], e[1]) for e in table_edges()})
