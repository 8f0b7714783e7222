"""SkyPilot's attempts' run directories, reached out of band (not through SkyPilot) with the
shared reader (`reader.py`), and their markers read in one command.

Run directories live under the profile's `remote_artifact_root` on the cluster's shared file
system, so they outlive the allocation (the cluster home, where SkyPilot keeps its own logs, is
deleted when the allocation ends). vibesys reaches them with a `Runner` on the login node (the
same host SkyPilot's `~/.slurm/config` names for the profile's infra, or this host): reading
markers and claims, copying logs home by byte offset, listing and fetching artifacts, and
writing the fence. The fence in particular must not go through `sky exec`: that is exactly the
channel whose earlier, possibly still pending, request it has to outrun.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Final

from vibesys.adapters.base import JobRef
from vibesys.adapters.rundir.claim import Claim, parse_claim
from vibesys.adapters.rundir.names import (
    CLAIM_FILE,
    EXIT_CODE_FILE,
    REFUSED_FILE,
    SETUP_FAILED_FILE,
)
from vibesys.adapters.rundir.reader import RunDirReader
from vibesys.adapters.transports import Runner
from vibesys.config.resources import expand_remote_root
from vibesys.errors import BackendUnavailable

__all__ = ["DirState", "RunDirs"]

# The remote account's user name and home, one a line.
_WHO: Final = 'printf "%s\\n%s\\n" "$(id -un)" "$HOME"'
# Every marker of every directory in one command, as JSON (python3 is on every login node the
# artifact listing already relies on), with the time the first one (the exit code) was written.
_READ_STATES: Final = r"""
import json, os, sys
def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None
def written(path):
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None
names = sys.argv[1:5]
def markers(d):
    found = {n: read(os.path.join(d, n)) for n in names}
    found["written"] = written(os.path.join(d, names[0]))
    return found
print(json.dumps({d: markers(d) for d in sys.argv[5:]}))
"""


@dataclass(frozen=True, slots=True)
class DirState:
    """What an attempt's run directory says about it."""

    claim: Claim | None
    exit_code: int | None
    refused: str | None
    setup_failed: int | None
    #: When the wrapper wrote the exit code (epoch seconds): the command's end by its own
    #: account, known before SkyPilot's queue records an end time of its own.
    exit_written_at: float | None = None

    def describe(self) -> str:
        parts = []
        if self.claim is not None:
            parts.append(f"claim kind={self.claim.kind}")
        if self.exit_code is not None:
            parts.append(f"exit_code={self.exit_code}")
        if self.refused is not None:
            parts.append("refused")
        if self.setup_failed is not None:
            parts.append(f"setup_failed={self.setup_failed}")
        return ", ".join(parts) or "no claim, no marker"


_EMPTY = DirState(None, None, None, None)


class RunDirs(RunDirReader):
    """SkyPilot's run directories under the profile's root, reached from the login node."""

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
        """Claim and markers of every job's run directory, keyed by job name, in one command."""
        if not jobs:
            return {}
        dirs = {str(self.remote_attempt_dir(job)): job.job_name for job in jobs}
        names = [EXIT_CODE_FILE, CLAIM_FILE, REFUSED_FILE, SETUP_FAILED_FILE]
        out = self.checked(["python3", "-c", _READ_STATES, *names, *dirs])
        try:
            data = json.loads(out)
        except json.JSONDecodeError:
            raise _malformed(f"unreadable run-directory states: {out[:200]!r}") from None
        states: dict[str, DirState] = {}
        for directory, name in dirs.items():
            files = data.get(directory) or {}
            states[name] = DirState(
                claim=parse_claim(files.get(CLAIM_FILE) or ""),
                exit_code=_number(files.get(EXIT_CODE_FILE)),
                refused=files.get(REFUSED_FILE),
                setup_failed=_number(files.get(SETUP_FAILED_FILE)),
                exit_written_at=_epoch(files.get("written")),
            )
        return states

    def state(self, job: JobRef) -> DirState:
        return self.states([job]).get(job.job_name, _EMPTY)

    # -- the fence --------------------------------------------------------------------------

    def fence(self, job: JobRef, text: str) -> Claim:
        """Create the attempt's claim as a fence (`text`) unless one is there; return the claim
        that is there now (the fence, or the job's own if it claimed first)."""
        claim, out = self.write_fence(job, text)
        if claim is None:
            raise _malformed(f"the fence left no readable claim: {out[:200]!r}")
        return claim


def _malformed(message: str) -> BackendUnavailable:
    # Imported when needed: the SkyPilot package imports this module.
    from vibesys.adapters.skypilot.errors import SkyMalformedOutput

    return SkyMalformedOutput(message)


def _epoch(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and value > 0 else None


def _number(text: str | None) -> int | None:
    value = (text or "").strip()
    return int(value) if value.lstrip("-").isdigit() else None
