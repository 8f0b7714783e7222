"""The log spool: remote logs copied home by byte offset, the offset committed to the journal.

For each attempt and stream the journal holds how many bytes are safely home. A pump first cuts
the local file back to that offset (bytes appended by a process that crashed before it could
commit them are read again), appends what the remote file has beyond it, fsyncs, and only then
yields the new offset (`LogsHome`), which the engine records before the pump goes on
(`Engine.recorded`). So after a reconnect, a crash and `reconcile`, or `vibesys logs --follow`,
the local spool ends byte-identical to the remote file: nothing lost, nothing twice.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path
from typing import BinaryIO

from vibesys.adapters.base import (
    Backend,
    GatheredCollection,
    JobRef,
    RemoteFiles,
)
from vibesys.adapters.rundir.names import STDERR_FILE, STDOUT_FILE
from vibesys.engine.failpoints import failpoint
from vibesys.engine.seen import LogsHome
from vibesys.journal_schema import Journal

STREAMS = (STDOUT_FILE, STDERR_FILE)


def spool_logs(journal: Journal, backend: Backend, job: JobRef) -> Generator[LogsHome, None, int]:
    """Bring every new byte of the job's logs home, stream by stream; how many arrived."""
    files = backend.remote_files()
    if files is None or job.attempt < 1:
        return 0
    job.attempt_dir.mkdir(parents=True, exist_ok=True)
    arrived = 0
    for stream in STREAMS:
        arrived += yield from _spool_one(journal, files, job, stream, job.attempt_dir / stream)
    return arrived


def _spool_one(
    journal: Journal, backend: RemoteFiles, job: JobRef, stream: str, local: Path
) -> Generator[LogsHome, None, int]:
    committed = journal.progress.spool_offset(job.invocation_id, job.attempt, stream)
    with open(local, "ab") as handle:
        cut = _cut_back(handle, committed)
        arrived = backend.read_log(job, stream, committed, handle)
        if arrived or cut:
            # The pump runs every few hundred milliseconds while a job runs, mostly finding
            # nothing new: an fsync then would be one per stream per turn, for nothing.
            handle.flush()
            os.fsync(handle.fileno())
    if arrived:
        failpoint("after_spool_append")
        yield LogsHome(job.invocation_id, job.attempt, stream, committed + arrived, arrived)
    return arrived


def _cut_back(handle: BinaryIO, committed: int) -> bool:
    """Put the spool file (open for appending) at the journal's offset; whether it moved.
    More than committed: a crash between append and commit. Less: the file was removed by
    hand. Either way the journal's offset is the truth."""
    if handle.tell() == committed:
        return False
    handle.truncate(committed)
    handle.seek(committed)
    return True


def spool_gathered(
    journal: Journal, backend: Backend, job: JobRef, patterns: list[str]
) -> Generator[LogsHome, None, GatheredCollection | None]:
    """Collect in one command where the adapter can (`GathersCollection`): both logs' rest
    comes home with the same rules as `spool_logs` (cut back to the committed offset, append,
    fsync, then the offset), the marker and the listing with them. None: collect the usual way."""
    gathers = backend.gathers_collection()
    if gathers is None or job.attempt < 1:
        return None
    job.attempt_dir.mkdir(parents=True, exist_ok=True)
    offsets = {s: journal.progress.spool_offset(job.invocation_id, job.attempt, s) for s in STREAMS}
    with (
        open(job.attempt_dir / STDOUT_FILE, "ab") as out,
        open(job.attempt_dir / STDERR_FILE, "ab") as err,
    ):
        handles = {STDOUT_FILE: out, STDERR_FILE: err}
        for stream, handle in handles.items():
            _cut_back(handle, offsets[stream])
        gathered = gathers.gather_collection(job, offsets, patterns, handles)
        if gathered is None:
            return None
        for handle in handles.values():
            handle.flush()
            os.fsync(handle.fileno())
    for stream in STREAMS:
        arrived = gathered.log_bytes.get(stream, 0)
        if arrived:
            failpoint("after_spool_append")
            yield LogsHome(
                job.invocation_id, job.attempt, stream, offsets[stream] + arrived, arrived
            )
    return gathered
