"""The state diagram as SVG, from the transition table (`vibesys/states/table.py`), with an
invocation's current state and the path its history took marked. No graphviz: a small
deterministic layout of our own.

- A state's column is its distance from the initial state (terminal states take the last
  column); the states of one column are ordered as `JobState` declares them, the first on the
  middle row, the next above it, then below.
- Internal events (the state stays) are listed inside their state's box.
- A trigger that leaves every non-terminal state for one state (Cancelled) is one arrow into
  it, "from any state", instead of one edge per state.
- Every other edge is a curve; its bend is the smallest (in the order 0, +25, -25, +50, ...)
  that keeps it and its label off the other boxes and the labels placed before it.
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from collections.abc import Iterable

import msgspec
from markupsafe import Markup, escape

from vibesys.states.job_state import INITIAL, TERMINAL, JobState
from vibesys.states.table import TRANSITIONS, dest_of, sources_of

COLUMN, ROW, BOX_W, MARGIN, LINE = 235, 150, 134, 30, 13
_BENDS = (0, 25, -25, 50, -50, 80, -80, 115, -115, 150, -150, 190, -190)
#: Where along its curve a label may sit (of 31 points), the middle first.
_LABEL_AT = (15, 11, 19, 7, 23)
_CHAR, _LABEL_H = 5.6, 12.0


class Edge(msgspec.Struct, frozen=True):
    source: JobState
    dest: JobState
    triggers: tuple[str, ...]


def edges() -> list[Edge]:
    """One edge per (source, destination), its triggers in the table's order."""
    labels: dict[tuple[JobState, JobState], list[str]] = defaultdict(list)
    for row in TRANSITIONS:
        for source in sources_of(row):
            labels[(source, dest_of(row) or source)].append(row["trigger"])
    return [Edge(s, d, tuple(t)) for (s, d), t in labels.items()]


def from_any_state() -> dict[str, JobState]:
    """Triggers that lead from every non-terminal state to one state: trigger -> that state."""
    every = set(JobState) - TERMINAL
    found = {}
    for row in TRANSITIONS:
        dest = dest_of(row)
        if dest is not None and set(sources_of(row)) == every:
            found[str(row["trigger"])] = dest
    return found


def layout() -> dict[JobState, tuple[int, int]]:
    """(column, row) of every state; row 0 is the middle one."""
    forward: dict[JobState, list[JobState]] = defaultdict(list)
    for e in edges():
        if e.source != e.dest:
            forward[e.source].append(e.dest)
    depth = {INITIAL: 0}
    queue = deque([INITIAL])
    while queue:
        state = queue.popleft()
        for nxt in forward[state]:
            if nxt not in depth and nxt not in TERMINAL:
                depth[nxt] = depth[state] + 1
                queue.append(nxt)
    last = max(depth.values()) + 1
    columns: dict[int, list[JobState]] = defaultdict(list)
    for state in JobState:  # declaration order
        columns[last if state in TERMINAL else depth.get(state, last)].append(state)
    placed = {}
    for column, states in columns.items():
        for index, state in enumerate(states):
            placed[state] = (column, (index + 1) // 2 * (-1 if index % 2 else 1))
    return placed


Box = tuple[float, float, float, float]  # left, top, right, bottom


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _inside(x: float, y: float, box: Box, pad: float = 6.0) -> bool:
    return box[0] - pad < x < box[2] + pad and box[1] - pad < y < box[3] + pad


def _clip(cx: float, cy: float, box: Box, tx: float, ty: float) -> tuple[float, float]:
    """Where the line from the box's centre (cx, cy) towards (tx, ty) leaves the box."""
    dx, dy = tx - cx, ty - cy
    half_w, half_h = (box[2] - box[0]) / 2 + 3, (box[3] - box[1]) / 2 + 3
    scale = min(half_w / abs(dx) if dx else math.inf, half_h / abs(dy) if dy else math.inf)
    return cx + dx * scale, cy + dy * scale


def _bezier(start: float, control: float, end: float, t: float) -> float:
    return (1 - t) ** 2 * start + 2 * (1 - t) * t * control + t * t * end


class _Canvas:
    def __init__(self) -> None:
        self.cells = layout()
        self.internal: dict[JobState, list[str]] = defaultdict(list)
        self.any_state = from_any_state()
        self.edges = []
        for e in edges():
            if e.source == e.dest:
                self.internal[e.source].extend(e.triggers)
                continue
            kept = tuple(t for t in e.triggers if self.any_state.get(t) != e.dest)
            if kept:
                self.edges.append(Edge(e.source, e.dest, kept))
        rows = [r for _, r in self.cells.values()]
        self.top = MARGIN + 40 + (-min(rows)) * ROW
        self.width = MARGIN * 2 + max(c for c, _ in self.cells.values()) * COLUMN + BOX_W
        self.boxes = {s: self._box(s) for s in self.cells}
        self.height = int(max(b[3] for b in self.boxes.values())) + MARGIN
        #: points of the curves routed so far (labels keep off them)
        self.points: list[tuple[float, float]] = []

    def centre(self, state: JobState) -> tuple[float, float]:
        column, row = self.cells[state]
        return MARGIN + column * COLUMN + BOX_W / 2, self.top + row * ROW

    def _box(self, state: JobState) -> Box:
        cx, cy = self.centre(state)
        height = 34 + LINE * len(self.internal[state])
        return cx - BOX_W / 2, cy - 17, cx + BOX_W / 2, cy - 17 + height

    def route(self, e: Edge, labels: list[Box]) -> tuple[str, float, float, Box, str]:
        """The path of `e`, its label's place and box: the first bend that clears the rest.
        A pair of edges both ways never takes the straight line: each bends to its left."""
        (sx, sy), (tx, ty) = self.centre(e.source), self.centre(e.dest)
        length = math.hypot(tx - sx, ty - sy)
        nx, ny = -(ty - sy) / length, (tx - sx) / length
        text = ", ".join(e.triggers)
        both_ways = any(o.source == e.dest and o.dest == e.source for o in self.edges)
        best: tuple[float, str, float, float, Box, list[tuple[float, float]], str] | None = None
        for bend in [b for b in _BENDS if b > 0] if both_ways else _BENDS:
            mx, my = (sx + tx) / 2 + nx * bend * 2, (sy + ty) / 2 + ny * bend * 2
            x0, y0 = _clip(sx, sy, self.boxes[e.source], mx, my)
            x1, y1 = _clip(tx, ty, self.boxes[e.dest], mx, my)
            points = [
                (_bezier(x0, mx, x1, t), _bezier(y0, my, y1, t))
                for t in (k / 32 for k in range(1, 32))
            ]
            others = [b for s, b in self.boxes.items() if s not in (e.source, e.dest)]
            crossed = sum(any(_inside(x, y, b) for b in others) for x, y in points) * 4
            crossed += sum(any(_inside(x, y, b, 2) for b in labels) for x, y in points)
            width = len(text) * _CHAR
            for place in _LABEL_AT:
                (ax, ay), (bx, by) = points[place - 1], points[place + 1]
                lx, ly = points[place]
                if abs(by - ay) > abs(bx - ax):  # steep: beside the curve, on its outer side
                    side = 1 if nx * bend > 0 or (bend == 0 and nx > 0) else -1
                    anchor = "start" if side > 0 else "end"
                    lx, ly = lx + side * 5, ly + 4
                    left = lx if side > 0 else lx - width
                else:
                    anchor, ly = "middle", ly - 4
                    left = lx - width / 2
                label: Box = (left, ly - _LABEL_H + 3, left + width, ly + 3)
                hits = sum(_overlaps(label, b) for b in [*self.boxes.values(), *labels]) * 4
                hits += sum(_inside(x, y, label, 2) for x, y in self.points)
                score = (crossed + hits) * 1000 + abs(bend) + abs(place - 15)
                if best is None or score < best[0]:
                    path = f"M{x0:.1f} {y0:.1f} Q{mx:.1f} {my:.1f} {x1:.1f} {y1:.1f}"
                    best = (score, path, lx, ly, label, points, anchor)
            if best is not None and best[0] < 1000:
                break
        assert best is not None
        self.points += best[5]
        return best[1], best[2], best[3], best[4], best[6]


def svg(
    current: JobState | None = None,
    taken: Iterable[tuple[str, str, str]] = (),
) -> Markup:
    """The diagram; `taken` are a history's (from, to, event) rows: their states are marked
    visited, their edges and internal events taken (with a count when more than once)."""
    canvas = _Canvas()
    counts: dict[tuple[str, str], int] = defaultdict(int)
    events: dict[tuple[str, str], int] = defaultdict(int)
    seen = {str(INITIAL)} if current is not None else set()
    for source, dest, event in taken:
        seen.update((source, dest))
        counts[(source, dest)] += 1
        events[(source, event)] += 1
    out = [
        f'<svg class="diagram" viewBox="0 0 {canvas.width} {canvas.height}" '
        f'width="{canvas.width}" height="{canvas.height}" role="img" aria-label="state diagram">',
        "<defs>",
        *(
            f'<marker id="arrow{kind}" class="arrowhead{kind}" viewBox="0 0 10 10" refX="9" '
            'refY="5" markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" '
            'orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z"/></marker>'
            for kind in ("", "-taken")
        ),
        "</defs>",
    ]
    labels: list[Box] = []
    for e in canvas.edges:
        path, lx, ly, box, anchor = canvas.route(e, labels)
        labels.append(box)
        count = counts[(str(e.source), str(e.dest))]
        out.append(_edge(e, path, lx, ly, anchor, count))
    for trigger, dest in canvas.any_state.items():
        count = sum(n for (_, event), n in events.items() if event == trigger)
        out.append(_any_state(trigger, canvas.boxes[dest], count))
    for state in canvas.cells:
        out.append(_state(state, canvas, current, seen, events))
    out.append("</svg>")
    return Markup("".join(out))


def _edge(e: Edge, path: str, lx: float, ly: float, anchor: str, count: int) -> str:
    taken = " taken" if count else ""
    marker = "url(#arrow-taken)" if count else "url(#arrow)"
    label = escape(", ".join(e.triggers)) + (f" ×{count}" if count > 1 else "")
    title = f"{e.source} → {e.dest}: {', '.join(e.triggers)}"
    return (
        f'<g class="edge{taken}" data-edge="{e.source}-{e.dest}"><title>{escape(title)}</title>'
        f'<path d="{path}" marker-end="{marker}"/>'
        f'<text class="{anchor}" x="{lx:.1f}" y="{ly:.1f}">{label}</text></g>'
    )


def _any_state(trigger: str, box: Box, count: int) -> str:
    cx, top = (box[0] + box[2]) / 2, box[1]
    taken = " taken" if count else ""
    marker = "url(#arrow-taken)" if count else "url(#arrow)"
    return (
        f'<g class="edge any{taken}" data-edge="any-{trigger}"><title>{escape(trigger)} '
        f"from any state but a final one</title>"
        f'<path d="M{cx:.1f} {top - 46:.1f} L{cx:.1f} {top - 4:.1f}" marker-end="{marker}"/>'
        f'<text class="end" x="{box[2]:.1f}" y="{top - 52:.1f}">{escape(trigger)} '
        "(from any state)</text></g>"
    )


def _state(
    state: JobState,
    canvas: _Canvas,
    current: JobState | None,
    seen: set[str],
    events: dict[tuple[str, str], int],
) -> str:
    left, top, right, bottom = canvas.boxes[state]
    cx = (left + right) / 2
    classes = ["state"]
    if state in TERMINAL:
        classes.append("terminal")
    if str(state) in seen:
        classes.append("visited")
    if state == current:
        classes.append("current")
    parts = [
        f'<g class="{" ".join(classes)}" data-state="{state}">'
        f'<rect x="{left:.1f}" y="{top:.1f}" width="{right - left:.0f}" '
        f'height="{bottom - top:.0f}" rx="10"/>'
        f'<text class="name" x="{cx:.1f}" y="{top + 22:.1f}">{state}</text>'
    ]
    for index, trigger in enumerate(canvas.internal[state]):
        count = events[(str(state), trigger)]
        taken = " taken" if count else ""
        times = f" ×{count}" if count > 1 else ""
        parts.append(
            f'<text class="internal{taken}" x="{cx:.1f}" y="{top + 36 + index * LINE:.1f}">'
            f"↻ {escape(trigger)}{times}</text>"
        )
    parts.append("</g>")
    return "".join(parts)


def table_json() -> dict[str, object]:
    """The diagram's data: the states with their places and internal events, and the edges."""
    canvas = _Canvas()
    return {
        "states": [
            {"state": s, "column": c, "row": r, "internal": canvas.internal[s]}
            for s, (c, r) in canvas.cells.items()
        ],
        "edges": [
            {"from": e.source, "to": e.dest, "triggers": list(e.triggers)} for e in canvas.edges
        ],
        "from_any_state": [{"trigger": t, "to": d} for t, d in canvas.any_state.items()],
    }
