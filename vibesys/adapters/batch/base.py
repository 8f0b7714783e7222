"""The base of every batch-scheduler backend: what such a backend does alike whatever the
scheduler. The remote attempt directory is read through `dirs` (`adapters.rundir.reader`): logs
by byte offset, artifacts, the probe for exit markers and the fence. The logs are spooled home
to the local attempt directory (`layout.log_paths`).

A subclass supplies the scheduler's side: `submit`, `status` (query and classify), `cancel`
and `collect`, and what a fence must also do (cancel whatever is queued under the name)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vibesys.adapters.base import (
    Backend,
    JobRef,
    RemoteStatus,
    SubmitReceipt,
    SubmitRequest,
)
from vibesys.adapters.rundir.claim import Claim
from vibesys.adapters.rundir.reader import ReadsRunDirs, RunDirReader
from vibesys.osutil.layout import log_paths

__all__ = ["BatchBackend"]


class BatchBackend(ReadsRunDirs, Backend):
    """A backend whose jobs a batch scheduler runs, their remote attempt directories `dirs`'."""

    name: str
    dirs: RunDirReader

    # -- the scheduler's side ---------------------------------------------------------------

    # -- what the engine may ask of it (adapters.base.Backend) ---------------------------

    def remote_files(self) -> BatchBackend:
        return self

    def submit(self, request: SubmitRequest[Any]) -> SubmitReceipt:
        raise NotImplementedError

    def status(self, jobs: Sequence[JobRef]) -> dict[str, RemoteStatus]:
        raise NotImplementedError

    def cancel(self, job: JobRef) -> None:
        raise NotImplementedError

    def collect(self, job: JobRef) -> str:
        raise NotImplementedError

    def fence(self, job: JobRef, text: str) -> Claim:
        raise NotImplementedError

    def poll_interval(self, age_seconds: float) -> float:
        raise NotImplementedError

    # -- the remote attempt directory's side ------------------------------------------------

    def log_paths(self, job: JobRef) -> tuple[Path, Path]:
        # The local spool: the engine copies the remote logs there by byte offset.
        return log_paths(job.attempt_dir)

    def probe(self, jobs: Sequence[JobRef]) -> set[str]:
        return self.dirs.probe(jobs)
