"""The template of every batch-scheduler backend. A subclass supplies the scheduler's side, as
template methods (underscored: the engine never calls them):

    submit(submission)    start the job under its name
    _query(jobs)          one round of the scheduler's answers about `jobs`
    _classify(job, seen)  one job's RemoteStatus from that round
    _cancel_queued(job)   cancel every job queued under the attempt's name

and the base does the rest alike whatever the scheduler: a status round (`_query` once, then
`_classify` each job), a cancel (recorded in the local attempt directory, then
`_cancel_queued`), the fence (claimed in the remote attempt directory; when it holds,
`_cancel_queued`), the exit marker's collection, and the remote files. The remote attempt
directory is read through `dirs` (`adapters.rundir.reader`): logs by byte offset, artifacts, the
probe for exit markers; the logs are spooled home to the local attempt directory
(`layout.log_paths`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vibesys.adapters.base import (
    Backend,
    GatheredCollection,
    JobRef,
    RemoteStatus,
    Sink,
    Submission,
    SubmitReceipt,
)
from vibesys.adapters.rundir.claim import Claim
from vibesys.adapters.rundir.names import CANCEL_FILE, EXIT_CODE_FILE
from vibesys.adapters.rundir.reader import ReadsRunDirs, RunDirReader
from vibesys.errors import BackendUnavailable
from vibesys.osutil.layout import log_paths

__all__ = ["BatchBackend"]

#: Seconds between status rounds unless the subclass says otherwise.
POLL_SECONDS = 5.0


class BatchBackend(ReadsRunDirs, Backend):
    """A backend whose jobs a batch scheduler runs, their remote attempt directories `dirs`'."""

    name: str
    dirs: RunDirReader

    def __init__(self, dirs: RunDirReader) -> None:
        self.dirs = dirs

    # -- the scheduler's side: what a subclass supplies --------------------------------------

    def submit(self, submission: Submission[Any]) -> SubmitReceipt:
        raise NotImplementedError

    def _query(self, jobs: Sequence[JobRef]) -> Any:
        """What the scheduler says about `jobs` (`jobs` is never empty), in as few calls as it
        can: whatever `_classify` reads."""
        raise NotImplementedError

    def _classify(self, job: JobRef, seen: Any) -> RemoteStatus:
        """`job`'s status from `seen`, the answer of `_query`."""
        raise NotImplementedError

    def _cancel_queued(self, job: JobRef) -> None:
        """Cancel every job queued under the attempt's name: the one recorded, and any copy
        that may have claimed the attempt instead."""
        raise NotImplementedError

    # -- what the engine may ask of it (adapters.base.Backend) -------------------------------

    def remote_files(self) -> BatchBackend:
        return self

    def gathers_collection(self) -> BatchBackend:
        return self

    def status(self, jobs: Sequence[JobRef]) -> dict[str, RemoteStatus]:
        if not jobs:
            return {}
        seen = self._query(jobs)
        return {job.job_name: self._classify(job, seen) for job in jobs}

    def cancel(self, job: JobRef) -> None:
        job.attempt_dir.mkdir(parents=True, exist_ok=True)
        (job.attempt_dir / CANCEL_FILE).touch()
        self._cancel_queued(job)

    def fence(self, job: JobRef, text: str) -> Claim:
        """Claim the remote attempt directory for nobody, unless its job did first; when
        the fence holds, cancel whatever was queued under the name (it could only refuse)."""
        claim, out = self.dirs.write_fence(job, text)
        if claim is None:
            remote = self.dirs.remote_attempt_dir(job)
            raise BackendUnavailable(f"fence: no readable claim in {remote}", evidence=out[:500])
        if claim.fenced:
            self._cancel_queued(job)
        return claim

    def collect(self, job: JobRef) -> str:
        """The logs come home through the spool; here only the marker, as a record."""
        remote = self.dirs.remote_attempt_dir(job)
        done = self.dirs.runner.run(
            ["cat", str(remote / EXIT_CODE_FILE)], timeout=self.dirs.timeout
        )
        return self._marker_record(job, done.stdout if done.returncode == 0 else None)

    def gather_collection(
        self,
        job: JobRef,
        offsets: Mapping[str, int],
        patterns: Sequence[str],
        sinks: Mapping[str, Sink],
    ) -> GatheredCollection | None:
        """Over a remote transport, the logs' rest, the marker and the artifacts' listing in
        one command (`adapters/rundir/gather.py`)."""
        if self.dirs.shares_filesystem:
            return None
        got = self.dirs.gather(job, offsets, patterns, sinks)
        return GatheredCollection(got.log_bytes, self._marker_record(job, got.marker), got.listing)

    def poll_interval(self, age_seconds: float) -> float:
        return POLL_SECONDS

    def log_paths(self, job: JobRef) -> tuple[Path, Path]:
        # The local spool: the engine copies the remote logs there by byte offset.
        return log_paths(job.attempt_dir)

    def probe(self, jobs: Sequence[JobRef]) -> set[str]:
        return self.dirs.probe(jobs)

    def _marker_record(self, job: JobRef, marker: str | None) -> str:
        remote = self.dirs.remote_attempt_dir(job)
        job.attempt_dir.mkdir(parents=True, exist_ok=True)
        if marker is None:
            return f"no marker in {remote}"
        (job.attempt_dir / EXIT_CODE_FILE).write_text(marker)
        return f"marker from {remote}: exit_code={marker.strip()}"
