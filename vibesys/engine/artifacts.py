"""Declared artifacts: listed remotely with size and sha256, downloaded, verified, recorded,
then acknowledged (only an acknowledged artifact's remote copy may be cleaned up).

Each step is yielded (`ArtifactStep`) and the engine records it before the collection goes on
(`records.record_step`): the listing before its download, the verified file after it. A crash
part-way resumes on reconcile: verified files are not downloaded again.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Generator
from pathlib import Path

from vibesys.adapters.base import ArtifactInfo, Backend, JobRef, Progress, RemoteFiles
from vibesys.engine.failpoints import failpoint
from vibesys.engine.seen import ArtifactStep
from vibesys.journal_schema import ArtifactState, Journal

DONE_STATES = (ArtifactState.VERIFIED, ArtifactState.ACKNOWLEDGED)


def collect_artifacts(
    journal: Journal,
    backend: Backend,
    job: JobRef,
    patterns: list[str],
    progress: Progress | None = None,
    *,
    listing: tuple[list[ArtifactInfo], list[str]] | None = None,
) -> Generator[ArtifactStep, None, str]:
    """Collect every declared artifact of this attempt; return a one-line summary (evidence).
    `progress` hears of each download (a terminal shows a bar for the big ones); `listing`,
    when the collection brought it already, saves listing the files again."""
    if not patterns:
        return ""
    files = backend.remote_files()
    if files is None:
        return f"artifacts: the {type(backend).__name__} adapter cannot collect artifacts"
    known = {row.path: row for row in journal.progress.artifacts(job.invocation_id, job.attempt)}
    found, missing = listing if listing is not None else files.list_artifacts(job, patterns)
    target_root = job.attempt_dir / "artifacts"
    counts = {state: 0 for state in ArtifactState}
    for info in found:
        row = known.get(info.path)
        if info.refused:  # over a limit where it is: not a byte of it comes home
            yield _step(job, info.path, ArtifactState.REFUSED, size=info.size, detail=info.refused)
            counts[ArtifactState.REFUSED] += 1
            continue
        if row is not None and row.state in DONE_STATES and row.sha256 == info.sha256:
            state = ArtifactState.ACKNOWLEDGED
        else:
            state = yield from _download(files, job, info, target_root, progress)
        if state is ArtifactState.VERIFIED:
            yield _step(job, info.path, ArtifactState.ACKNOWLEDGED)
            state = ArtifactState.ACKNOWLEDGED
        counts[state] += 1
    for pattern in missing:
        why = f"nothing matched {pattern!r} in the job's directory"
        yield _step(job, pattern, ArtifactState.MISSING, detail=why)
        counts[ArtifactState.MISSING] += 1
    return "artifacts: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n)


def _step(
    job: JobRef,
    path: str,
    state: ArtifactState,
    *,
    size: int | None = None,
    sha256: str | None = None,
    local_path: str | None = None,
    detail: str | None = None,
) -> ArtifactStep:
    return ArtifactStep(
        invocation_id=job.invocation_id,
        attempt=job.attempt,
        path=path,
        state=state,
        size=size,
        sha256=sha256,
        local_path=local_path,
        detail=detail,
    )


def _download(
    backend: RemoteFiles,
    job: JobRef,
    info: ArtifactInfo,
    root: Path,
    progress: Progress | None = None,
) -> Generator[ArtifactStep, None, ArtifactState]:
    yield _step(job, info.path, ArtifactState.LISTED, size=info.size, sha256=info.sha256)
    target = root / info.path
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    digest = _HashingFile(partial, progress, info.size)
    if progress is not None:
        progress.begin(f"artifact {info.path}", info.size)
    try:
        backend.fetch_artifact(job, info.path, digest)
    except _Overrun:
        pass  # the download was stopped at the listed size: a mismatch, recorded below
    finally:
        digest.close()
        if progress is not None:
            progress.end()
    actual = digest.hexdigest()
    if digest.overrun or actual != info.sha256 or digest.size != info.size:
        got = f"more than {info.size}" if digest.overrun else str(digest.size)
        detail = (
            f"listed {info.size} bytes sha256 {info.sha256}, downloaded {got} bytes sha256 {actual}"
        )
        yield _step(job, info.path, ArtifactState.MISMATCH, detail=detail)
        return ArtifactState.MISMATCH
    os.replace(partial, target)
    failpoint("after_artifact_download")
    yield _step(job, info.path, ArtifactState.VERIFIED, local_path=str(target))
    return ArtifactState.VERIFIED


class _Overrun(Exception):
    """More bytes came than the listing announced."""


class _HashingFile:
    """A file sink that hashes what it writes and fsyncs on close; past `limit` bytes it
    stops the download (`_Overrun`): a file swapped since its listing, for a link to an
    endless one, never fills the disk."""

    def __init__(self, path: Path, progress: Progress | None = None, limit: int = -1) -> None:
        self._handle = open(path, "wb")  # noqa: SIM115 - closed in close()
        self._hash = hashlib.sha256()
        self._progress = progress
        self._limit = limit
        self.size = 0
        self.overrun = False

    def write(self, data: bytes, /) -> int:
        if 0 <= self._limit < self.size + len(data):
            self.overrun = True
            raise _Overrun
        self._hash.update(data)
        self.size += len(data)
        if self._progress is not None:
            self._progress.advance(len(data))
        return self._handle.write(data)

    def flush(self) -> None:
        self._handle.flush()

    def close(self) -> None:
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()

    def hexdigest(self) -> str:
        return self._hash.hexdigest()
