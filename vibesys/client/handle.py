"""One invocation as a `vibesys.Client` serves it: its driver thread and what a caller asks.

The driver is `wait_for`, as `vibesys wait` runs it: it drives the invocation while no other
live process does (this process recorded it, or its driver died) and follows it while one
does. It is a follower: stopping it (the client closes) leaves the job running, cancelled
by nothing; the next process that attaches carries it on. Each thread has its own journal
connection and engine; the status rounds of a scheduler's site are shared by every thread
and process on this host (`engine/shared_poll.py`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

from msgspec import Struct

from vibesys.adapters.base import Progress
from vibesys.engine import DriveOptions, Engine, StopFlag, wait_for
from vibesys.engine import drive as drive_to_end
from vibesys.engine.cancel import cancel_at_deadline
from vibesys.errors import VibesysError
from vibesys.job_result import TIMEOUT_CANCEL, JobResult, result_from_journal
from vibesys.journal_schema import Invocation, Journal, open_journal
from vibesys.osutil.layout import attempt_dir, log_paths
from vibesys.osutil.logtail import SpoolOnly, new_bytes
from vibesys.states import JobState

__all__ = ["Handle", "Status"]

#: How often `logs(follow=True)` looks for new bytes.
FOLLOW_SECONDS: Final = 0.1


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


class Handle:
    """A submitted (or attached) invocation: `id`, `status()`, `result()`, `cancel()`,
    `logs()`. Made by `Client.submit` and `Client.attach`, never directly."""

    def __init__(
        self,
        journal_path: Path,
        invocation_id: str,
        timeout: float | None,
        connection: Journal | None = None,
    ) -> None:
        self.id = invocation_id
        self._path = journal_path
        #: the caller's connection (a `Client` made on one): a `drive=False` handle's calls use it
        self._connection = connection
        self._stop = StopFlag()
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._timeout = timeout
        #: the clients that hold this handle: it is driven until the last one closes
        self.users: set[object] = set()
        #: False for a handle its caller drives (`drive=False`): the journal says when it ends
        self._driven = False
        self._thread = threading.Thread(
            target=self._drive, name=f"vibesys-{invocation_id}", daemon=True
        )

    def __repr__(self) -> str:
        return f"Handle({self.id!r})"

    # -- what a caller asks ---------------------------------------------------------------

    def status(self) -> Status:
        with self._journal() as journal:
            inv = journal.invocations.get(self.id)
            attempts = journal.invocations.attempts(self.id)
        return Status(
            invocation_id=inv.id,
            state=str(inv.state),
            outcome=None if inv.outcome is None else str(inv.outcome),
            exit_code=inv.exit_code,
            attempt=inv.attempt,
            job_id=attempts[-1].job_id if attempts else None,
            ended=inv.state in (JobState.DONE, JobState.UNRESOLVED),
        )

    def result(self, timeout: float | None = None) -> JobResult:
        """Block until the invocation ends (at most `timeout` seconds: TimeoutError), then its
        JobResult. NotEnded when the client closed before it ended, or (a handle its caller
        drives) when it has not ended."""
        if not self._driven:
            with self._journal() as journal:
                return result_from_journal(journal, self.id)
        if not self._done.wait(timeout):
            raise TimeoutError(f"invocation {self.id} has not ended after {timeout} s")
        if self._error is not None:
            raise VibesysError(f"driving {self.id} failed: {self._error}") from self._error
        with self._journal() as journal:
            return result_from_journal(journal, self.id)

    def done(self) -> bool:
        """Whether this handle's driver has finished (`result()` will not block)."""
        return self._done.is_set() or not self._driven

    def cancel(self, by: str = "vibesys.Client cancel") -> str:
        """Ask for the invocation's cancel (committed now, as `vibesys cancel` does, `by`
        saying who asked); its driver sends it and settles it. `result()` waits for the
        settlement. The invocation's state once the cancel is committed."""
        with self._journal() as journal:
            inv = Engine(journal).request_cancel(journal.invocations.get(self.id), by)
        return str(inv.state)

    def logs(
        self, follow: bool = False, stream: str = "stdout", offset: int = 0
    ) -> Iterator[bytes]:
        """The job's bytes (`stream`: stdout or stderr), unchanged, every attempt's in turn,
        from the local attempt directories, from byte `offset` of them all on (a reader that
        stopped resumes where it was); `follow`: until the invocation ends."""
        if stream not in ("stdout", "stderr"):
            raise ValueError(f"stream {stream!r}: stdout or stderr")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset {offset!r}: a byte count, 0 or more")
        chunks = self._chunks(follow, 0 if stream == "stdout" else 1)
        for chunk in chunks:
            if offset >= len(chunk):
                offset -= len(chunk)
                continue
            yield chunk[offset:]
            offset = 0

    def _chunks(self, follow: bool, which: int) -> Iterator[bytes]:
        offsets: dict[Path, int] = {}
        while True:
            ended = not follow or self._done.is_set()
            with self._journal() as journal:
                inv = journal.invocations.get(self.id)
                if not self._driven:
                    ended = ended or inv.state in (JobState.DONE, JobState.UNRESOLVED)
                numbers = [a.attempt for a in journal.invocations.attempts(self.id)]
            for number in numbers:
                path = log_paths(attempt_dir(inv.invocation_dir, number))[which]
                yield from new_bytes(path, offsets)
            if ended:
                return
            time.sleep(FOLLOW_SECONDS)

    # -- driven or followed by its caller (`drive=False`) ---------------------------------

    def drive(self, options: DriveOptions, progress: Progress | None = None) -> Invocation:
        """Drive the invocation here, in the caller's thread, to its end (or until it runs,
        `options.detach`): a `drive=False` submission of this process, which holds its lease.
        `options` carry the caller's output, status line and interrupt (an owner's interrupt
        cancels the job); `progress` hears of transfers. The invocation as it ends."""
        with self._journal() as journal:
            engine = Engine(journal, progress=progress)
            return drive_to_end(engine, journal.invocations.get(self.id), options)

    def follow(self, options: DriveOptions, progress: Progress | None = None) -> Invocation:
        """Follow the invocation here, in the caller's thread, until it ends, driving it
        whenever no live process does, as this client's own driver threads do (`vibesys
        wait`, `logs --follow`); with `options.owner` False an interrupt stops only the
        following. The invocation as it stands at the end."""
        with self._journal() as journal:
            return wait_for(Engine(journal, progress=progress), self.id, options)

    # -- the driver -----------------------------------------------------------------------

    def start(self) -> None:
        self._driven = True
        self._thread.start()

    def stop(self, wait_seconds: float) -> None:
        """Stop driving (the job runs on) and let its lease go."""
        self._stop.set()
        self._thread.join(wait_seconds)

    def _drive(self) -> None:
        try:
            journal = open_journal(self._path)
            try:
                self._deadline(journal)
                options = DriveOptions(tail=SpoolOnly(), interrupt=self._stop, owner=False)
                wait_for(Engine(journal), self.id, options)
            finally:
                journal.close()
        except BaseException as exc:  # a thread must never die silently: result() says it
            self._error = exc
        finally:
            self._done.set()

    def _deadline(self, journal: Journal) -> None:
        """The submission's timeout, counted from its recording, cancels it (marked as the
        timeout's: its result is TIMEOUT)."""
        if not self._timeout:
            return
        inv = journal.invocations.get(self.id)
        if inv.state is JobState.DONE:
            return
        created = inv.created_at if inv.created_at.tzinfo else inv.created_at.replace(tzinfo=UTC)
        left = (created + timedelta(seconds=self._timeout) - datetime.now(UTC)).total_seconds()
        by = f"{TIMEOUT_CANCEL} {self._timeout:g} s"
        cancel_at_deadline(self._path, self.id, left, self._done, by)

    @contextmanager
    def _journal(self) -> Iterator[Journal]:
        """A connection for one call: a handle is used from any thread (asyncio's workers
        too), and a connection stays on the thread that opened it."""
        if self._connection is not None:
            yield self._connection
            return
        journal = open_journal(self._path)
        try:
            yield journal
        finally:
            journal.close()
