"""The attempts of one invocation on a time line: when each was intended, submitted, queued
(with the scheduler's reason), started and ended, and its retries and fences, from the
journal's record alone; drawn as SVG on the server.

The start and end are the scheduler's where the attempt's provenance has them (Slurm's
`start`/`end`, cluster-local times read in this host's time zone; SkyPilot's `started_at`/
`ended_at`); a local job starts when it is submitted; else the end is when the journal
recorded it (a moment after the fact).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import msgspec
from markupsafe import Markup, escape

from vibesys.journal_schema.records import Attempt, HistoryRow, Invocation
from vibesys.states import JobState

#: The history's events that end an attempt, and the marks others leave on its lane.
_ENDS = (
    "Finished",
    "InfraFailed",
    "ParentAttemptFailed",
    "Cancelled",
    "Rejected",
    "Misconfigured",
)
_MARKS = {
    "FenceIntended": "fence",
    "OutcomeUnknown": "unknown",
    "CancelRequested": "cancel",
    "InfraFailed": "retry",
}
#: Tick steps of the time axis, in seconds.
_STEPS = (
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1,
    2,
    5,
    10,
    15,
    30,
    60,
    120,
    300,
    600,
    900,
    1800,
    3600,
    7200,
    21600,
    43200,
    86400,
)
WIDTH, LEFT, RIGHT, TOP, LANE = 960, 175, 20, 46, 38


def _when(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment.astimezone() if moment.tzinfo is None else moment


class Span(msgspec.Struct, frozen=True):
    kind: str  # submitting, queued, running, collecting
    start: datetime
    end: datetime
    #: still going (its end is now)
    open: bool
    text: str

    def __post_init__(self) -> None:
        if self.end < self.start:  # a clock behind the record (another host's): no negative span
            msgspec.structs.force_setattr(self, "end", self.start)


class Mark(msgspec.Struct, frozen=True):
    kind: str  # fence, fenced, unknown, cancel, retry
    at: datetime
    text: str


class Lane(msgspec.Struct):
    attempt: int
    job: str
    ended: str
    spans: list[Span] = msgspec.field(default_factory=list)
    marks: list[Mark] = msgspec.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "job": self.job,
            "ended": self.ended,
            "spans": [
                {"kind": s.kind, "start": s.start.isoformat(), "end": s.end.isoformat()}
                | {"open": s.open, "text": s.text}
                for s in self.spans
            ],
            "marks": [{"kind": m.kind, "at": m.at.isoformat(), "text": m.text} for m in self.marks],
        }


def _rows_of(history: Sequence[HistoryRow]) -> dict[int, list[HistoryRow]]:
    """Each attempt's history rows: from its SubmitIntended to the next one."""
    found: dict[int, list[HistoryRow]] = {}
    current = 0
    for row in history:
        if row.event == "SubmitIntended":
            current = int(row.evidence.get("attempt", current + 1))
        found.setdefault(current, []).append(row)
    return found


def lanes(
    inv: Invocation,
    attempts: Sequence[Attempt],
    history: Sequence[HistoryRow],
    seen: dict[str, Any],
    now: datetime,
) -> list[Lane]:
    rows = _rows_of(history)
    found = []
    for a in attempts:
        own = rows.get(a.attempt, [])
        current = a.attempt == inv.attempt and inv.state is not JobState.DONE
        lane = Lane(a.attempt, a.job_id or a.job_name, str(a.failure_class or ""))
        intended = a.intended_at
        submitted = a.submitted_at
        prov = a.provenance
        started = _when(prov.get("start") or prov.get("started_at"))
        if started is None and inv.adapter == "local":
            started = submitted
        end_row = next((r for r in own if r.event in _ENDS), None)
        ended = _when(prov.get("end") or prov.get("ended_at"))
        if ended is None and end_row is not None:
            ended = end_row.at
        going = ended is None and current
        last = own[-1].at if own else None
        stop = ended or (now if going else last or intended)
        lane.spans.append(
            Span("submitting", intended, submitted or stop, submitted is None and going, "")
        )
        if submitted is not None:
            reason = ""
            if current and seen.get("sight") == "queued":
                reason = str(seen.get("reason") or "")
            queued_until = started or stop
            lane.spans.append(
                Span("queued", submitted, queued_until, started is None and going, reason)
            )
            if started is not None:
                lane.spans.append(Span("running", started, stop, going, ""))
        collected = next((r for r in own if r.event == "Collected"), None)
        if collected is not None and end_row is not None and end_row.event == "Finished":
            lane.spans.append(Span("collecting", end_row.at, collected.at, False, ""))
        for r in own:
            kind = _MARKS.get(r.event)
            if kind:
                lane.marks.append(Mark(kind, r.at, _mark_text(r)))
        if a.claim and a.claim.startswith("kind=fence"):
            at = a.fence_intended_at or stop
            lane.marks.append(Mark("fenced", at, "fenced: the attempt never ran"))
        found.append(lane)
    return found


def _mark_text(row: HistoryRow) -> str:
    evidence = row.evidence
    detail = evidence.get("failure_class") or evidence.get("observation") or ""
    text = f"{row.event} {detail}".strip()
    if evidence.get("not_before"):
        text += f"; next attempt after {evidence['not_before']}"
    return " ".join(text.split())[:300]


def _step(seconds: float) -> float:
    return next((s for s in _STEPS if seconds / s <= 8), _STEPS[-1])


def _offset(seconds: float) -> str:
    if seconds < 1 and seconds:
        return f"+{seconds * 1000:.0f}ms"
    if seconds < 60 and abs(seconds - round(seconds)) > 1e-6:
        return f"+{seconds:.1f}s"
    s = round(seconds)
    if s < 60:
        return f"+{s}s"
    if s < 3600:
        return f"+{s // 60}m{s % 60:02d}s" if s % 60 else f"+{s // 60}m"
    return f"+{s // 3600}h{s % 3600 // 60:02d}m"


def svg(found: Sequence[Lane]) -> Markup:
    """The lanes as one SVG: an axis of offsets from the first intent, a lane per attempt."""
    if not found:
        return Markup("")
    moments = [t for lane in found for s in lane.spans for t in (s.start, s.end)]
    moments += [m.at for lane in found for m in lane.marks]
    t0, t1 = min(moments), max(moments)
    total = max((t1 - t0).total_seconds(), 0.01)
    plot = WIDTH - LEFT - RIGHT

    def x(moment: datetime) -> float:
        return LEFT + (moment - t0).total_seconds() / total * plot

    height = TOP + LANE * len(found) + 10
    out = [
        f'<svg class="timeline" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
        f'height="{height}" role="img" aria-label="timeline of the attempts">',
        f'<text class="axis-caption" x="4" y="14">from {escape(t0.isoformat(" ", "seconds"))}'
        "</text>",
    ]
    step = _step(total)
    for k in range(int(total / step + 1e-9) + 1):
        tx = LEFT + k * step / total * plot
        out.append(f'<line class="tick" x1="{tx:.1f}" y1="{TOP - 8}" x2="{tx:.1f}" y2="{height}"/>')
        out.append(
            f'<text class="tick-label" x="{tx:.1f}" y="{TOP - 12}">{_offset(k * step)}</text>'
        )
    for index, lane in enumerate(found):
        y = TOP + index * LANE
        out.append(
            f'<text class="lane-label" x="4" y="{y + 22}">attempt {lane.attempt} '
            f"{escape(lane.ended)}</text>"
        )
        for s in lane.spans:
            left, right = x(s.start), x(s.end)
            width = max(right - left, 2.0)
            title = f"{s.kind} {s.start.isoformat()} to {'now' if s.open else s.end.isoformat()}"
            if s.text:
                title += f": {s.text}"
            open_class = " open" if s.open else ""
            out.append(
                f'<g class="span span-{s.kind}{open_class}"><title>{escape(title)}</title>'
                f'<rect x="{left:.1f}" y="{y + 8}" width="{width:.1f}" height="20" rx="3"/>'
            )
            label = s.text or s.kind
            if width > 7 * len(label) + 8:
                out.append(f'<text x="{left + 4:.1f}" y="{y + 22}">{escape(label)}</text>')
            out.append("</g>")
        for m in lane.marks:
            mx = x(m.at)
            out.append(
                f'<g class="mark mark-{m.kind}"><title>{escape(m.text)}</title>'
                f'<path d="M{mx:.1f} {y + 2} l6 6 l-6 6 l-6 -6 z"/></g>'
            )
    out.append("</svg>")
    return Markup("".join(out))


def until_now(inv: Invocation, now: datetime) -> timedelta:
    end = inv.updated_at if inv.state is JobState.DONE else now
    return end - inv.created_at
