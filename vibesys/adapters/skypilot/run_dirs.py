"""SkyPilot's remote attempt directories, reached out of band (not through SkyPilot) with the
shared reader (`reader.py`), and their markers read in one command.

They live under the profile's `remote_artifact_root` on the cluster's shared file
system, so they outlive the allocation (the cluster home, where SkyPilot keeps its own logs, is
deleted when the allocation ends). vibesys reaches them with a `Runner` on the login node (the
same host SkyPilot's `~/.slurm/config` names for the profile's infra, or this host): reading
markers and claims, copying logs home by byte offset, listing and fetching artifacts, and
writing the fence. The fence in particular must not go through `sky exec`: that is exactly the
channel whose earlier, possibly still pending, request it has to outrun.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Final

from vibesys.adapters.base import JobRef
from vibesys.adapters.rundir.claim import Claim
from vibesys.adapters.rundir.markers import NO_MARKERS, DirState, parse_markers, read_script
from vibesys.adapters.rundir.reader import RunDirReader
from vibesys.adapters.skypilot.errors import SkyMalformedOutput
from vibesys.adapters.transports import Runner
from vibesys.config.resources import expand_remote_root
from vibesys.errors import BackendUnavailable

__all__ = ["RunDirs"]

# The remote account's user name and home, one a line.
_WHO: Final = 'printf "%s\\n%s\\n" "$(id -un)" "$HOME"'


class RunDirs(RunDirReader):
    """SkyPilot's remote attempt directories under the profile's root, from the login node."""

    def __init__(self, runner: Runner, root: str, *, timeout: float = 60.0) -> None:
        super().__init__(runner, timeout=timeout, where="on the login node")
        self.root_template = root
        self._root: PurePosixPath | None = None

    # -- paths ------------------------------------------------------------------------------

    def root(self) -> PurePosixPath:
        """The root with $USER/$HOME expanded as the remote account sees them (asked once)."""
        if self._root is None:
            template = self.root_template
            if "$" in template:
                out = self.checked(["sh", "-c", _WHO])
                user, _, home = out.rstrip("\n").partition("\n")
                if not user or not home.startswith("/"):
                    raise _malformed(f"cannot read the remote user and home: {out!r}")
                template = expand_remote_root(template, user, home)
            self._root = PurePosixPath(template)
        return self._root

    def remote_attempt_dir(self, job: JobRef) -> PurePosixPath:
        if not job.invocation_id or job.attempt < 1:
            raise ValueError(f"job {job.job_name}: no invocation id or attempt number")
        return super().remote_attempt_dir(job)

    # -- reading ----------------------------------------------------------------------------

    def states(self, jobs: Sequence[JobRef]) -> dict[str, DirState]:
        """Claim and markers of every job's remote attempt directory, with the time the exit code
        was written (`markers.py`), keyed by job name, in one command."""
        if not jobs:
            return {}
        dirs = {str(self.remote_attempt_dir(job)): job.job_name for job in jobs}
        out = self.checked(["sh", "-c", read_script(times=True), "vibesys-markers", *dirs])
        states = parse_markers(out, dirs)
        if len(states) < len(dirs):
            raise _malformed(f"run-directory states cut short: {out[-200:]!r}")
        return states

    def state(self, job: JobRef) -> DirState:
        return self.states([job]).get(job.job_name, NO_MARKERS)

    # -- the fence --------------------------------------------------------------------------

    def fence(self, job: JobRef, text: str) -> Claim:
        """Create the attempt's claim as a fence (`text`) unless one is there; return the claim
        that is there now (the fence, or the job's own if it claimed first)."""
        claim, out = self.write_fence(job, text)
        if claim is None:
            raise _malformed(f"the fence left no readable claim: {out[:200]!r}")
        return claim


def _malformed(message: str) -> BackendUnavailable:
    return SkyMalformedOutput(message)
