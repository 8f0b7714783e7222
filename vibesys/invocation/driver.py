"""Driving one invocation, or following it: in the caller's thread (`drive`, `follow`), or
in a thread of its own (`start`), as `vibesys.Client`'s handles and `vibesys run` do.

The thread is `wait_for`, as `vibesys wait` runs it: it drives the invocation while no other
live process does (this process recorded it, or its driver died) and follows it while one
does. It is a follower: stopping it (the client closes) leaves the job running, cancelled
by nothing; the next process that attaches carries it on. Each thread has its own journal
connection and engine; the status rounds of a scheduler's site are shared by every thread
and process on this host (`engine/shared_poll.py`).
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from vibesys.adapters.base import Progress
from vibesys.engine import DriveOptions, Engine, StopFlag, wait_for
from vibesys.engine import drive as drive_to_end
from vibesys.engine.cancel import cancel_at_deadline
from vibesys.errors import VibesysError
from vibesys.invocation.journals import JournalAccess
from vibesys.journal_schema import Invocation, Journal
from vibesys.osutil.logtail import SpoolOnly
from vibesys.states import JobState
from vibesys.states.events import TIMEOUT_CANCEL

__all__ = ["Driver"]


class Driver:
    """The engine's side of one invocation on the journal `journals` opens: its cancel, its
    drive or follow in the caller's thread, or its driver thread (`start`) with the
    submission's `timeout` (seconds from its recording) as a deadline."""

    def __init__(self, journals: JournalAccess, invocation_id: str, timeout: float | None) -> None:
        self.id = invocation_id
        self._journals = journals
        self._timeout = timeout
        self._stop = StopFlag()
        self._done = threading.Event()
        self._error: BaseException | None = None
        #: False while its caller drives it (`drive`, `follow`): the journal says when it ends
        self.threaded = False
        self._thread = threading.Thread(
            target=self._run, name=f"vibesys-{invocation_id}", daemon=True
        )

    def cancel(self, by: str) -> str:
        """Commit the invocation's cancel request (as `vibesys cancel` does, `by` saying who
        asked); whoever drives it sends it and settles it. Its state once committed."""
        with self._journals.open() as journal:
            inv = Engine(journal).request_cancel(journal.invocations.get(self.id), by)
        return str(inv.state)

    def drive(self, options: DriveOptions, progress: Progress | None = None) -> Invocation:
        """Drive the invocation here, in the caller's thread, to its end (or until it runs,
        `options.detach`): a submission of this process, which holds its lease. The
        invocation as it ends."""
        with self._journals.open() as journal:
            engine = Engine(journal, progress=progress)
            return drive_to_end(engine, journal.invocations.get(self.id), options)

    def follow(self, options: DriveOptions, progress: Progress | None = None) -> Invocation:
        """Follow the invocation here, in the caller's thread, until it ends, driving it
        whenever no live process does. The invocation as it stands at the end."""
        with self._journals.open() as journal:
            return wait_for(Engine(journal, progress=progress), self.id, options)

    # -- the driver thread ----------------------------------------------------------------

    def start(self) -> None:
        self.threaded = True
        self._thread.start()

    def stop(self, wait_seconds: float) -> None:
        """Stop driving (the job runs on) and let its lease go."""
        self._stop.set()
        self._thread.join(wait_seconds)

    def done(self) -> bool:
        """Whether the driver thread has finished (none was started: true)."""
        return self._done.is_set() or not self.threaded

    def wait(self, timeout: float | None) -> None:
        """Until the driver thread finishes (TimeoutError after `timeout` seconds);
        VibesysError when it failed."""
        if not self.threaded:
            return
        if not self._done.wait(timeout):
            raise TimeoutError(f"invocation {self.id} has not ended after {timeout} s")
        if self._error is not None:
            raise VibesysError(f"driving {self.id} failed: {self._error}") from self._error

    def _run(self) -> None:
        try:
            journals = JournalAccess(self._journals.path)  # this thread's own connection
            with journals.open() as journal:
                self._deadline(journal)
                options = DriveOptions(tail=SpoolOnly(), interrupt=self._stop, owner=False)
                wait_for(Engine(journal), self.id, options)
        except BaseException as exc:  # a thread must never die silently: wait() says it
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
        cancel_at_deadline(self._journals.path, self.id, left, self._done, by)
