"""`vibesys.Client`: run evaluations from Python, each a journaled invocation with a handle.

`submit` records the invocation (PREPARED) exactly as `vibesys run` does (the adapter's
request is built by the same registry functions from the same options,
`vibesys.invocation.submission`) and returns at once; a thread per handle drives it
(`handle.py`). An idempotency key is recorded before anything is submitted
(`vibesys.invocation.keys`), so the same key never runs twice: not in this process, not in
another, not after a crash of either.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from vibesys.client.handle import Handle
from vibesys.errors import UsageError
from vibesys.invocation import submission
from vibesys.invocation.journals import JournalAccess
from vibesys.invocation.keys import Recording, RequestRow, record_request
from vibesys.journal_schema import Journal, journal_path, open_journal
from vibesys.journal_schema.recorded_evaluations import RecordedEvaluation

__all__ = ["Client"]

#: How long `close()` waits for the drivers to let their invocations go.
CLOSE_SECONDS: Final = 30.0

#: The handles being driven in this process, by journal and invocation, whichever client
#: made them (each handle knows the clients that use it).
_DRIVEN: dict[tuple[Path, str], Handle] = {}
_DRIVEN_LOCK = threading.Lock()


class Client:
    """Submits evaluations and follows them, on the journal at `journal` (None:
    `$VIBESYS_JOURNAL`, else `.vibesys/journal.db`, as the CLI). A context manager: closing
    stops following; the jobs run on, and `attach` (or `vibesys wait`) carries them on.

    `journal` may also be an open connection (`Journal`): the calls of this client and of its
    `drive=False` handles use it, from the caller's thread, and never close it; its faults are
    the caller's to report (the CLI's commands, one connection each)."""

    def __init__(self, journal: str | os.PathLike[str] | Journal | None = None) -> None:
        self._connection = journal if isinstance(journal, Journal) else None
        if isinstance(journal, Journal):
            self.journal_path = journal.path.absolute()
        else:
            self.journal_path = journal_path(journal).absolute()
            open_journal(self.journal_path).close()  # created or upgraded now: a bad one fails
        # One connection per call unless the caller gave one: a client is used from any
        # thread (asyncio's workers too).
        self._journals = JournalAccess(self.journal_path, self._connection)
        self._closed = False

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop driving and following (the jobs run on; their leases are let go)."""
        with _DRIVEN_LOCK:
            self._closed = True
            mine = [(key, handle) for key, handle in _DRIVEN.items() if self in handle.users]
            for key, handle in mine:
                handle.users.discard(self)
                if not handle.users:  # another client of this process may still follow it
                    del _DRIVEN[key]
            unused = [handle for _, handle in mine if not handle.users]
        deadline = time.monotonic() + CLOSE_SECONDS
        for handle in unused:
            handle.stop(max(deadline - time.monotonic(), 0.0))

    def submit(
        self,
        argv: Sequence[str],
        *,
        adapter: str = "local",
        key: str | None = None,
        label: str | None = None,
        candidate: str | os.PathLike[str] | None = None,
        artifacts: Sequence[str] = (),
        gpus: int | None = None,
        time_minutes: int | None = None,
        partition: str | None = None,
        slurm_config: str | os.PathLike[str] | None = None,
        profile: str | None = None,
        timeout: float | None = None,
        retries: int = 2,
        retry_delay: float = 2.0,
        unreachable_timeout: float = 600.0,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        drive: bool = True,
        **options: Any,
    ) -> Handle:
        """Record `argv` as an invocation on `adapter` and start driving it; returns at once.

        `key`: an idempotency key, recorded before anything is submitted: the same key again
        (here, in another process, after a crash) returns the handle of the same invocation;
        with other arguments it is refused (KeyConflict). `options`: the adapter's other
        `vibesys run` options by their names (`exclude`, `nodes`, `run_id`, `after`, ...).
        `timeout`: seconds from the recording, then it is cancelled (result TIMEOUT). `env`:
        variables on top of this process's environment. `drive=False`: nothing in this client
        drives it; the caller does, in its own thread (`vibesys run` does, to own its signals
        and its terminal). Bad input raises UsageError (or ConfigError) with nothing
        recorded."""
        self._check_open()
        with self._journals.open() as journal:
            found = submission.submit(
                journal,
                argv,
                adapter=adapter,
                key=key,
                label=label,
                candidate=candidate,
                artifacts=artifacts,
                gpus=gpus,
                time_minutes=time_minutes,
                partition=partition,
                slurm_config=slurm_config,
                profile=profile,
                timeout=timeout,
                retries=retries,
                retry_delay=retry_delay,
                unreachable_timeout=unreachable_timeout,
                cwd=cwd,
                env=env,
                **options,
            )
        return self._follow(found.invocation_id, found.timeout, drive)

    def attach(self, key_or_id: str, *, drive: bool = True, record_missing: bool = True) -> Handle:
        """The handle of an invocation by its idempotency key, or its id (a unique prefix
        will do): followed, and driven whenever no live process drives it (`drive=False`:
        by the caller, as `vibesys wait` does). A key whose recorder died before recording
        its invocation gets it recorded now; `record_missing=False` (a read-only journal, as
        `vibesys result` opens) refuses it instead, with UsageError, writing nothing."""
        self._check_open()
        with self._journals.open() as journal:
            found = submission.attach(journal, key_or_id, record_missing=record_missing)
        return self._follow(found.invocation_id, found.timeout, drive)

    def submit_request(
        self,
        row: RequestRow,
        recording: Callable[[RecordedEvaluation], Recording],
        check: Callable[[RecordedEvaluation], None] = lambda _row: None,
    ) -> tuple[Handle, RecordedEvaluation, bool]:
        """Submit a request recorded under the caller's own ids with its own identity (the
        evaluation bridge's: run id, request id, uid, workspace, body, results directory):
        `row` is committed first (write-ahead), then the invocation it names, recorded from
        `recording(row)` (a typed adapter request, the job's whole environment, its campaign)
        unless it is already. The same ids again (here, after a restart, from another
        process) find the first row: `check(row)` refuses it by raising, before anything more
        is recorded. Returns the handle (its caller drives it, as `drive=False`), the row as
        recorded, and whether the row is new."""
        self._check_open()
        with self._journals.open() as journal:
            found, created = record_request(journal, row, check, recording)
        return self._follow(found.invocation_id, None, False), found, created

    def _follow(self, invocation_id: str, timeout: float | None, drive: bool) -> Handle:
        # One driver per invocation in this process, whichever client asks: its threads share
        # the process's identity, so the invocation's lease cannot keep two of them apart.
        if not drive:
            return Handle(self.journal_path, invocation_id, timeout, self._connection)
        with _DRIVEN_LOCK:
            self._check_open()
            handle = _DRIVEN.get((self.journal_path, invocation_id))
            if handle is None:
                handle = Handle(self.journal_path, invocation_id, timeout)
                _DRIVEN[self.journal_path, invocation_id] = handle
                handle.start()
            handle.users.add(self)
        return handle

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError("this vibesys.Client is closed")
