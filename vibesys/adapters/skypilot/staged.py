"""A SkyPilot evaluation's candidate, staged the way the Slurm adapters stage theirs: one
snapshot policy (credentials, .env, keys, VCS metadata, caches, run state and large files left
out), the digest recorded at PREPARED, staged once per digest through the login node under the
profile's `remote_artifact_root` (`snapshots/<digest>/`, on the shared file system), then copied
into the attempt's work directory and verified there by the job before its command runs.
SkyPilot's own workdir sync is not used: nothing else of the directory leaves the host, and an
unchanged candidate sends nothing again."""

from __future__ import annotations

import shlex
from pathlib import PurePosixPath

from vibesys.adapters import staging
from vibesys.adapters.base import Progress
from vibesys.adapters.candidate import RecordedCandidate, checked_manifest, digest_candidate
from vibesys.adapters.skypilot.request import SkyPilotRequest
from vibesys.adapters.skypilot.run_dirs import RunDirs

__all__ = ["stage_candidate"]


def stage_candidate(
    request: SkyPilotRequest, dirs: RunDirs, work: PurePosixPath, progress: Progress | None = None
) -> tuple[str, str]:
    """Stage the request's candidate (when it has one) and return the job's setup line (copy
    the snapshot into `work`, verify its digest) and the staging's evidence; ("", "") without
    a candidate. The candidate must still have its recorded digest."""
    candidate = _candidate(request)
    if candidate is None:
        return "", ""
    manifest = checked_manifest(candidate)
    result = staging.stage(
        manifest, candidate.path, dirs.runner, dirs.root(), timeout=dirs.timeout, progress=progress
    )
    steps = (
        staging.copy_command(result.snapshot_dir, work),
        staging.verify_command(work, manifest.digest),
    )
    return " && ".join(shlex.join(step) for step in steps), result.evidence


def _candidate(request: SkyPilotRequest) -> RecordedCandidate | None:
    if request.candidate is not None:
        return request.candidate
    # Recorded before candidates were snapshots: the same policy, its digest taken now.
    return digest_candidate(request.workdir, (), flag="--workdir") if request.workdir else None
