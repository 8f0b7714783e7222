"""Server-sent events: the list and an invocation's page, live.

A stream looks at the journal's files every POLL_SECONDS (a `stat`, no query) and reads the
journal only when they changed; it then sends the parts of the page that changed, rendered by
the same templates as the page. An invocation's stream also sends its current attempt's new
output, by byte offset (the event id carries the offsets, so a reconnecting browser resumes
where it was); a stream more than a page's tail behind jumps to the tail (a page never holds
more, and never lags by more), so once the invocation is DONE what is left goes at once and
the stream ends. Every stream
ends within a poll once the server is stopping (Ctrl-C), so it stops at once and cleanly.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, TypeVar

import anyio
import msgspec

from vibesys.states import JobState
from vibesys.ui import logs
from vibesys.ui.queries import ListFilter

T = TypeVar("T")
POLL_SECONDS = 0.25
#: A comment line this often keeps proxies and the browser from timing the stream out, and
#: finds a browser that went away.
KEEPALIVE_SECONDS = 10.0
#: Re-read the journal at least this often, whatever its files say.
REFRESH_SECONDS = 15.0
#: An unfinished invocation's page is judged against the clock this often though nothing
#: changed: its timeline grows, and a lease that expired meanwhile is no longer a driver.
TICK_SECONDS = 2.0
#: The parts of an invocation's page that depend on the clock.
CLOCK_PARTS = ("inv-top",)


class Live(Protocol):
    def stamp(self) -> tuple[object, ...]: ...
    def stopping(self) -> bool: ...
    def list_parts(self, flt: ListFilter) -> dict[str, str]: ...
    def list_fingerprint(self) -> tuple[object, ...]: ...
    def invocation_parts(
        self, prefix: str, attempt: int, only: tuple[str, ...] | None = None
    ) -> tuple[Progress, dict[str, str]]: ...


class Progress(msgspec.Struct, frozen=True):
    """The facts a stream follows an invocation by."""

    version: int
    state: JobState
    attempt: int
    invocation_dir: str


def sse(event: str, data: Any, event_id: str | None = None) -> bytes:
    lines = [f"event: {event}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append("data: " + json.dumps(data, separators=(",", ":")))
    return ("\n".join(lines) + "\n\n").encode()


async def _off_loop(fn: Callable[..., T], *args: Any) -> T:
    """Journal reads and file reads block: they run on a worker thread."""
    return await anyio.to_thread.run_sync(fn, *args)


class _Clock:
    def __init__(self) -> None:
        self.quiet = 0.0
        self.since_read = 0.0

    def tick(self) -> None:
        self.quiet += POLL_SECONDS
        self.since_read += POLL_SECONDS

    def keepalive(self) -> bool:
        if self.quiet >= KEEPALIVE_SECONDS:
            self.quiet = 0.0
            return True
        return False


async def list_events(live: Live, flt: ListFilter) -> AsyncIterator[bytes]:
    stamp: tuple[object, ...] | None = None
    marked: tuple[object, ...] | None = None
    sent: dict[str, str] | None = None
    clock = _Clock()
    while not live.stopping():
        now_stamp = live.stamp()
        due = clock.since_read >= REFRESH_SECONDS
        if now_stamp != stamp or due:
            stamp = now_stamp
            # The list only when what it shows may have changed: a filtered list costs more
            # to read than the whole one's first page, and most commits renew a lease.
            mark = await _off_loop(live.list_fingerprint)
            if mark != marked or due:
                marked, clock.since_read = mark, 0.0
                parts = await _off_loop(live.list_parts, flt)
                if parts != sent:
                    sent, clock.quiet = parts, 0.0
                    yield sse("html", parts)
        if clock.keepalive():
            yield b": keepalive\n\n"
        await anyio.sleep(POLL_SECONDS)
        clock.tick()


def resume_point(last_event_id: str | None, attempt: int, out: int, err: int) -> tuple[int, ...]:
    """(attempt, stdout offset, stderr offset) from the browser's Last-Event-ID, when it sent
    one this stream made, else from the page's own."""
    if last_event_id:
        parts = last_event_id.split(":")
        if len(parts) == 3 and all(p.isdecimal() and len(p) < 19 for p in parts):
            return tuple(int(p) for p in parts)
    return attempt, out, err


async def invocation_events(
    live: Live, prefix: str, attempt: int, offsets: dict[str, int]
) -> AsyncIterator[bytes]:
    """The page of `prefix` showing `attempt`'s output up to `offsets`, kept up to date."""
    stamp: tuple[object, ...] | None = None
    sent: dict[str, str] = {}
    progress: Progress | None = None
    clock = _Clock()
    following = True
    while not live.stopping():
        now_stamp = live.stamp()
        if progress is None or now_stamp != stamp or clock.since_read >= TICK_SECONDS:
            # Only the clock moved: only the summary and the time line can have changed.
            only = CLOCK_PARTS if progress is not None and now_stamp == stamp else None
            stamp, clock.since_read = now_stamp, 0.0
            found, parts = await _off_loop(live.invocation_parts, prefix, attempt, only)
            if progress is None:
                following = found.attempt == attempt
            changed = {part: html for part, html in parts.items() if sent.get(part) != html}
            if changed:
                sent, clock.quiet = {**sent, **parts}, 0.0
                yield sse("html", changed)
            if following and found.attempt != attempt:  # a retry: follow the new attempt
                attempt, offsets = found.attempt, dict.fromkeys(logs.STREAMS, 0)
                yield sse("reset", {"attempt": attempt}, f"{attempt}:0:0")
            progress = found
        final = progress.state is JobState.DONE
        if following and attempt:
            invocation_dir = progress.invocation_dir
            for stream in logs.STREAMS:
                path = logs.log_path(invocation_dir, attempt, stream)
                while True:
                    offset = offsets[stream]
                    chunk = await _off_loop(logs.follow, path, stream, offset, final)
                    if chunk.end == chunk.start:
                        break
                    offsets[stream], clock.quiet = chunk.end, 0.0
                    event_id = f"{attempt}:{offsets['stdout']}:{offsets['stderr']}"
                    # skipped: bytes past what the page shows that it will never get (it shows
                    # the tail, as a page load does; the whole file is a link away)
                    extra = {"attempt": attempt, "skipped": chunk.start - offset}
                    yield sse("log", chunk.to_json() | extra, event_id)
                    if not final:
                        break  # one chunk per stream and round: others get their turn
        if final:
            yield sse("end", {"state": str(progress.state)})
            return
        if clock.keepalive():
            yield b": keepalive\n\n"
        await anyio.sleep(POLL_SECONDS)
        clock.tick()
