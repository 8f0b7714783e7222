"""Live status on a terminal: one updating line while a job is submitted, queued or running
(its state, the scheduler's reason, partition, nodes and the time since the run began), and a
progress bar for a transfer above a few MB (staging a candidate, downloading an artifact). Both
are one transient line on stderr, redrawn in place (a carriage return and an erase-line escape)
and erased before the job's output is written and before the final summary, so what stays on
the terminal is the job's output.

The CLI uses it only when stdout and stderr are both terminals and `--json` is not given;
otherwise nothing of it exists. Pure presentation: nothing here is ever decided by.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from vibesys.engine.seen import Seen
    from vibesys.journal_schema import Invocation

#: Transfers smaller than this show no bar.
PROGRESS_MIN_BYTES = 4 << 20
#: The line is redrawn at most this often unless its words change (a local job's round is
#: every 20 ms; a fast link advances a bar thousands of times a second).
_REDRAW_SECONDS = 0.2

_WORDS = {
    "starting": "starting",
    "queued": "queued",
    "running": "running",
    "ended": "ended",
    "unreachable": "scheduler unreachable",
    "blocked": "blocked",
    "unknown": "looking",
    "absent": "looking",
    "claimed": "running",
    "fenced": "fenced",
    "unsatisfiable": "killed with its parent's failed job",
}


def status_text(inv: Invocation, seen: Seen | None, elapsed: float) -> str:
    """The status line's words: `<id> queued (Priority) on main · 0:12`."""
    if inv.state == "SUBMITTING" and seen is None:
        what = "submitting"
    elif inv.state == "COLLECTING":
        what = "collecting"
    elif inv.state == "RETRYING" and inv.failure_class == "DEPENDENCY_FAILED":
        what = "waiting for its parent's next attempt"
    elif inv.state == "RETRYING":
        what = "waiting to retry"
    elif seen is None:
        what = "submitted"
    else:
        what = _WORDS.get(str(seen.sight), str(seen.sight))
        if str(seen.sight) == "unreachable" and seen.fix:
            what = f"login refused: {seen.fix}"  # a credential to renew, not an outage
        if seen.reason and str(seen.sight) in ("queued", "starting"):
            what += f" ({seen.reason})"
        if seen.nodes:
            what += f" on {seen.nodes}"
            if seen.partition:
                what += f" ({seen.partition})"
        elif seen.partition:
            what += f" in {seen.partition}"
    minutes, seconds = divmod(int(elapsed), 60)
    hours, minutes = divmod(minutes, 60)
    clock = f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"
    return f"{inv.id} {what} · {clock}"


#: Back to the line's start and erase it: what redraws and clears the status line.
ERASE = "\r\x1b[2K"
#: A braille spinner, one frame per `_FRAME_SECONDS` since the run began.
_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_FRAME_SECONDS = 0.08
_BAR_WIDTH = 40
#: The width when the stream's terminal does not say.
_DEFAULT_COLUMNS = 80


class LiveStatus:
    """The status line and the transfer bar: one transient line on a terminal (stderr)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.started = time.monotonic()
        self._on_screen = False
        self._status = ""
        self._bar: tuple[str, int, int] | None = None
        self._drawn = 0.0
        self._shown = ""

    # -- the status line (engine.drive.StatusSink) ------------------------------------------

    def show(self, inv: Invocation, seen: Seen | None) -> None:
        if inv.state in ("DONE", "PREPARED"):
            self.clear()
            return
        self._status = status_text(inv, seen, time.monotonic() - self.started)
        if self._status != self._shown or time.monotonic() - self._drawn >= _REDRAW_SECONDS:
            self._draw()

    def clear(self) -> None:
        """Erase the line (before the job's output, or at the end)."""
        if self._on_screen:
            self._write(ERASE)
            self._on_screen = False

    # -- a transfer (adapters.base.Progress) -----------------------------------------------

    def begin(self, label: str, total: int) -> None:
        self._bar = (label, max(total, 1), 0) if total >= PROGRESS_MIN_BYTES else None
        self._draw()

    def advance(self, count: int) -> None:
        if self._bar is None:
            return
        label, total, done = self._bar
        self._bar = (label, total, done + count)
        if time.monotonic() - self._drawn >= _REDRAW_SECONDS:
            self._draw()

    def end(self) -> None:
        if self._bar is not None:
            self._bar = None
            self.clear()

    # -- drawing -----------------------------------------------------------------------------

    def _line(self) -> str:
        if self._bar is not None:
            label, total, done = self._bar
            filled = _BAR_WIDTH * min(done, total) // total
            bar = "━" * filled + "╺" * (_BAR_WIDTH - filled)
            return f"{label}  {done / 1e6:.1f}/{total / 1e6:.1f} MB  {bar}"
        frame = int((time.monotonic() - self.started) / _FRAME_SECONDS) % len(_SPINNER)
        return f"{_SPINNER[frame]} {self._status}"

    def _columns(self) -> int:
        try:
            return os.get_terminal_size(self.stream.fileno()).columns or _DEFAULT_COLUMNS
        except (AttributeError, OSError, ValueError):  # not a terminal, or no descriptor
            return _DEFAULT_COLUMNS

    def _draw(self) -> None:
        if not self._status and self._bar is None:
            return
        self._drawn = time.monotonic()
        self._shown = self._status
        # Kept within the width: a wrapped line could not be erased in place.
        line, room = self._line(), self._columns() - 1
        if len(line) > room:
            line = line[: max(room - 1, 0)] + "…"
        self._write(ERASE + line)
        self._on_screen = True

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()
