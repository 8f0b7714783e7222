"""The one reader of remote attempt directories, where the jobs ran: their paths under a root,
the logs from a byte offset, the declared artifacts, the fence, the probe for exit markers and
the gathering of a whole collection in one command. Slurm and SkyPilot both read through it; each
gives the root (`root`) and says whether the cluster's files are this host's."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Final

from vibesys.adapters.base import ArtifactInfo, JobRef, Sink
from vibesys.adapters.rundir.claim import FENCE_SCRIPT, Claim, parse_claim
from vibesys.adapters.rundir.files import fetch_file, list_artifacts_in, read_from
from vibesys.adapters.rundir.gather import Gathered, gather
from vibesys.adapters.rundir.listing import DEFAULT_LIMITS
from vibesys.adapters.rundir.names import EXIT_CODE_FILE, STDERR_FILE, STDOUT_FILE, WORK_DIR
from vibesys.adapters.transports import Runner
from vibesys.errors import BackendUnavailable

__all__ = ["RunDirReader", "copy_from"]

#: Prints each directory given that holds an exit_code marker (the probe between rounds).
PROBE_MARKERS: Final = (
    f'for d in "$@"; do [ -e "$d/{EXIT_CODE_FILE}" ] && printf "%s\\n" "$d"; done; exit 0'
)


class RunDirReader:
    """Remote attempt directories `<root>/<invocation>/<attempt>` reached through `runner`.

    `shares_filesystem`: the cluster's files are this host's, so logs and markers are read as
    files, no command started. `where` ends a failed command's message ("on the login node")."""

    def __init__(
        self,
        runner: Runner,
        *,
        timeout: float,
        shares_filesystem: bool = False,
        where: str = "",
    ) -> None:
        self.runner = runner
        self.timeout = timeout
        self.shares_filesystem = shares_filesystem
        self.where = where

    # -- paths ------------------------------------------------------------------------------

    def root(self) -> PurePosixPath:
        raise NotImplementedError

    def remote_attempt_dir(self, job: JobRef) -> PurePosixPath:
        return self.root() / job.invocation_id / str(job.attempt)

    def work_dir(self, job: JobRef) -> PurePosixPath:
        """Where the command runs (and declared artifacts are found)."""
        return self.remote_attempt_dir(job) / WORK_DIR

    # -- commands ---------------------------------------------------------------------------

    def checked(self, argv: Sequence[str]) -> str:
        result = self.runner.run(argv, timeout=self.timeout)
        if result.returncode != 0:
            where = f" {self.where}" if self.where else ""
            raise BackendUnavailable(f"{argv[0]}{where} failed", evidence=result.evidence())
        return result.stdout

    # -- reading ----------------------------------------------------------------------------

    def read_log(self, job: JobRef, stream: str, offset: int, sink: Sink) -> int:
        if stream not in (STDOUT_FILE, STDERR_FILE):
            raise ValueError(f"unknown log stream {stream!r}")
        path = str(self.remote_attempt_dir(job) / stream)
        if self.shares_filesystem:
            # The cluster's files are this host's: read them, no command to start.
            return copy_from(path, offset, sink)
        return read_from(self.runner, path, offset, sink)

    def list_artifacts(
        self, job: JobRef, patterns: Sequence[str]
    ) -> tuple[list[ArtifactInfo], list[str]]:
        limits = job.artifact_limits or DEFAULT_LIMITS
        return list_artifacts_in(self.checked, self.work_dir(job), patterns, limits)

    def fetch_artifact(self, job: JobRef, path: str, sink: Sink) -> None:
        fetch_file(self.runner, str(self.work_dir(job) / path), sink)

    def probe(self, jobs: Sequence[JobRef]) -> set[str]:
        """The jobs whose exit_code marker exists: a stat each on a shared file system, else
        one remote command for all of them."""
        dirs = {str(self.remote_attempt_dir(j)): j.job_name for j in jobs}
        if not dirs:
            return set()
        if self.shares_filesystem:
            return {name for d, name in dirs.items() if os.path.exists(f"{d}/{EXIT_CODE_FILE}")}
        out = self.checked(["sh", "-c", PROBE_MARKERS, "vibesys-probe", *dirs])
        return {dirs[line] for line in out.splitlines() if line in dirs}

    def gather(
        self,
        job: JobRef,
        offsets: Mapping[str, int],
        patterns: Sequence[str],
        sinks: Mapping[str, Sink],
    ) -> Gathered:
        """The logs' rest, the marker and the artifacts' listing in one command (gather.py)."""
        remote, work = str(self.remote_attempt_dir(job)), str(self.work_dir(job))
        limits = job.artifact_limits or DEFAULT_LIMITS
        return gather(
            self.runner,
            remote,
            work,
            offsets,
            patterns,
            sinks,
            list_limit=self.timeout,
            limits=limits,
        )

    # -- the fence --------------------------------------------------------------------------

    def write_fence(self, job: JobRef, text: str) -> tuple[Claim | None, str]:
        """Create the attempt's claim as a fence (`text`) unless one is there; the claim that
        is there now (the fence, or the job's own if it claimed first; None when unreadable)
        and what the command printed."""
        argv = ["sh", "-c", FENCE_SCRIPT, "vibesys-fence", str(self.remote_attempt_dir(job)), text]
        out = self.checked(argv)
        return parse_claim(out), out


def copy_from(path: str, offset: int, sink: Sink) -> int:
    """Copy `path` from `offset` to `sink`; 0 bytes for a file that does not exist yet."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise BackendUnavailable(f"reading {path} failed: {exc.strerror or exc}") from None
    copied = 0
    with handle:
        handle.seek(offset)
        while chunk := handle.read(1 << 20):
            sink.write(chunk)
            copied += len(chunk)
    return copied


class ReadsRunDirs:
    """The remote-files side of a backend whose remote attempt directories `dirs` reads: logs
    by byte offset and artifacts (`Backend.remote_files()`), the same for every such backend."""

    dirs: RunDirReader

    def read_log(self, job: JobRef, stream: str, offset: int, sink: Sink) -> int:
        return self.dirs.read_log(job, stream, offset, sink)

    def list_artifacts(
        self, job: JobRef, patterns: Sequence[str]
    ) -> tuple[list[ArtifactInfo], list[str]]:
        return self.dirs.list_artifacts(job, patterns)

    def fetch_artifact(self, job: JobRef, path: str, sink: Sink) -> None:
        self.dirs.fetch_artifact(job, path, sink)
