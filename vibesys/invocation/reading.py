"""What the journal and the spool say of one invocation now, read without the engine: its
`Status`, and its job's bytes by offset (`Handle.status`, `Handle.logs`, `vibesys logs`, the
bridge's follower)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Final, Literal

from msgspec import Struct

from vibesys.invocation.journals import JournalAccess
from vibesys.journal_schema.records import Invocation
from vibesys.journal_schema.store import Journal
from vibesys.osutil.layout import attempt_dir, log_paths
from vibesys.osutil.logtail import CHUNK
from vibesys.states.job_state import JobState

__all__ = ["CHUNK", "FOLLOW_SECONDS", "Status", "Stream", "attempt_bytes", "log_bytes", "status"]

#: How often `log_bytes(follow=True)` looks for new bytes.
FOLLOW_SECONDS: Final = 0.1

Stream = Literal["stdout", "stderr"]


class Status(Struct, frozen=True):
    """An invocation as the journal has it now."""

    invocation_id: str
    state: str
    outcome: str | None
    exit_code: int | None
    attempt: int
    job_id: str | None
    #: DONE, or UNRESOLVED: `result()` has the answer
    ended: bool


def ended(inv: Invocation) -> bool:
    return inv.state in (JobState.DONE, JobState.UNRESOLVED)


def status(journal: Journal, invocation_id: str) -> Status:
    inv = journal.invocations.get(invocation_id)
    attempts = journal.invocations.attempts(invocation_id)
    return Status(
        invocation_id=inv.id,
        state=str(inv.state),
        outcome=None if inv.outcome is None else str(inv.outcome),
        exit_code=inv.exit_code,
        attempt=inv.attempt,
        job_id=attempts[-1].job_id if attempts else None,
        ended=ended(inv),
    )


def check_stream(stream: str) -> Stream:
    if stream == "stdout":
        return "stdout"
    if stream == "stderr":
        return "stderr"
    raise ValueError(f"stream {stream!r}: stdout or stderr")


def check_offset(offset: int) -> int:
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset {offset!r}: a byte count, 0 or more")
    return offset


def attempt_bytes(
    inv: Invocation, attempt: int, stream: Stream, offset: int = 0, chunk: int = CHUNK
) -> Iterator[bytes]:
    """The bytes of one attempt's `stream` in the local attempt directory from byte `offset`
    on, in chunks of at most `chunk` bytes (none while the file is not there)."""
    path = log_paths(attempt_dir(inv.invocation_dir, attempt))[stream == "stderr"]
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            while piece := handle.read(chunk):
                yield piece
    except FileNotFoundError:
        return  # not written yet (the attempt has not started, or its logs are not home)


def log_bytes(
    journals: JournalAccess,
    invocation_id: str,
    *,
    stream: str = "stdout",
    offset: int = 0,
    follow: bool = False,
    attempt: int | None = None,
    chunk: int = CHUNK,
    stopped: Callable[[], bool] | None = None,
) -> Iterator[bytes]:
    """The job's bytes (`stream`), unchanged, from the local attempt directories: every
    attempt's in turn from byte `offset` of them all on, or (`attempt`) that attempt's alone
    from byte `offset` of it; in chunks of at most `chunk` bytes. `follow`: until the
    journal says the invocation ended, or (`stopped`) until `stopped()` says its driver
    did."""
    which = check_stream(stream)
    skip = check_offset(offset)  # bytes not to yield, counted over every attempt read
    read: dict[int, int] = {}  # how far each attempt's file has been read
    if attempt is not None:  # that attempt's file alone, from its byte `offset`
        read[attempt], skip = skip, 0
    while True:
        finished = not follow or (stopped is not None and stopped())
        with journals.open() as journal:
            inv = journal.invocations.get(invocation_id)
            finished = finished or (stopped is None and ended(inv))
            if attempt is None:
                numbers = [a.attempt for a in journal.invocations.attempts(invocation_id)]
            else:
                numbers = [attempt]
        for number in numbers:
            start = read.get(number, 0)
            for piece in attempt_bytes(inv, number, which, start, chunk):
                read[number] = start = start + len(piece)
                if skip >= len(piece):
                    skip -= len(piece)
                    continue
                yield piece[skip:]
                skip = 0
        if finished:
            return
        time.sleep(FOLLOW_SECONDS)
