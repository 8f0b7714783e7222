"""One invocation as a `vibesys.Client` serves it: what a caller asks of it, composed of its
`Driver` (the engine's side: drive, follow, cancel, the driver thread), the journal's and the
spool's reading (status, logs) and its JobResult."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from vibesys.adapters.base import Progress
from vibesys.engine import DriveOptions
from vibesys.invocation.driver import Driver
from vibesys.invocation.journals import JournalAccess
from vibesys.invocation.reading import CHUNK, Status, log_bytes, status
from vibesys.job_result import JobResult, JobStatus, result_from_journal
from vibesys.journal_schema import Invocation, Journal

__all__ = ["Handle", "Status"]


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
        #: the caller's connection (a `Client` made on one): a `drive=False` handle's calls use it
        self._journals = JournalAccess(journal_path, connection)
        self.driver = Driver(self._journals, invocation_id, timeout)
        #: the clients that hold this handle: it is driven until the last one closes
        self.users: set[object] = set()

    def __repr__(self) -> str:
        return f"Handle({self.id!r})"

    def status(self) -> Status:
        with self._journals.open() as journal:
            return status(journal, self.id)

    def result(
        self, timeout: float | None = None, *, unfinished: JobStatus | None = None
    ) -> JobResult:
        """Block until the invocation ends (at most `timeout` seconds: TimeoutError), then its
        JobResult. NotEnded when the client closed before it ended, or (a handle its caller
        drives) when it has not ended, unless `unfinished` names the status to give it then
        (the bridge's: an evaluation its teardown could not settle is UNRESOLVED)."""
        self.driver.wait(timeout)
        with self._journals.open() as journal:
            return result_from_journal(journal, self.id, unfinished=unfinished)

    def done(self) -> bool:
        """Whether this handle's driver has finished (`result()` will not block)."""
        return self.driver.done()

    def cancel(self, by: str = "vibesys.Client cancel") -> str:
        """Ask for the invocation's cancel (committed now, as `vibesys cancel` does, `by`
        saying who asked); its driver sends it and settles it. `result()` waits for the
        settlement. The invocation's state once the cancel is committed."""
        return self.driver.cancel(by)

    def logs(
        self,
        follow: bool = False,
        stream: str = "stdout",
        offset: int = 0,
        *,
        attempt: int | None = None,
        chunk: int = CHUNK,
    ) -> Iterator[bytes]:
        """The job's bytes (`stream`: stdout or stderr), unchanged, from the local attempt
        directories: every attempt's in turn, from byte `offset` of them all on (a reader
        that stopped resumes where it was), or (`attempt`) that attempt's alone from byte
        `offset` of it; in chunks of at most `chunk` bytes. `follow`: until the invocation
        ends."""
        threaded = self.driver.threaded
        return log_bytes(
            self._journals,
            self.id,
            stream=stream,
            offset=offset,
            follow=follow,
            attempt=attempt,
            chunk=chunk,
            stopped=self.driver.done if threaded else None,
        )

    # -- driven or followed by its caller (`drive=False`) ---------------------------------

    def drive(self, options: DriveOptions, progress: Progress | None = None) -> Invocation:
        """Drive the invocation here, in the caller's thread, to its end (or until it runs,
        `options.detach`): a `drive=False` submission of this process, which holds its lease.
        `options` carry the caller's output, status line and interrupt (an owner's interrupt
        cancels the job); `progress` hears of transfers. The invocation as it ends."""
        return self.driver.drive(options, progress)

    def follow(self, options: DriveOptions, progress: Progress | None = None) -> Invocation:
        """Follow the invocation here, in the caller's thread, until it ends, driving it
        whenever no live process does, as this client's own driver threads do (`vibesys
        wait`, `logs --follow`); with `options.owner` False an interrupt stops only the
        following. The invocation as it stands at the end."""
        return self.driver.follow(options, progress)

    # -- the driver thread ----------------------------------------------------------------

    def start(self) -> None:
        self.driver.start()

    def stop(self, wait_seconds: float) -> None:
        """Stop driving (the job runs on) and let its lease go."""
        self.driver.stop(wait_seconds)
