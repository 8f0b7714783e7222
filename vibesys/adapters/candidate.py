"""The candidate an evaluation runs in, the same for every adapter that stages one (sbatch,
srun, SkyPilot): a directory snapshotted under one policy (`vibesys.snapshot`: credentials,
.env, keys, VCS metadata, caches, run state and large files left out), whose digest is recorded
at PREPARED and must still hold when it is staged; the job verifies it where it runs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from msgspec import Struct

from vibesys.errors import BackendMisconfigured, UsageError
from vibesys.snapshot import CandidateError, Manifest, SnapshotPolicy, build_manifest

__all__ = ["RecordedCandidate", "checked_manifest", "digest_candidate"]


class RecordedCandidate(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The candidate directory to snapshot, and the digest recorded at PREPARED."""

    #: the candidate directory (absolute)
    path: str
    #: extra exclusion patterns
    exclude: tuple[str, ...] = ()
    #: sha256 of the snapshot's content, recorded at PREPARED
    digest: str


def digest_candidate(
    directory: Path | str | None, exclude: Sequence[str], *, flag: str = "--candidate"
) -> RecordedCandidate | None:
    """The candidate `directory` with its digest now (None: no candidate)."""
    if directory is None:
        if exclude:
            raise UsageError(f"--exclude needs {flag}")
        return None
    candidate = Path(directory)
    if not candidate.is_dir():
        raise UsageError(f"{flag} {candidate}: not a directory")
    manifest = build_manifest(candidate, SnapshotPolicy(exclude=tuple(exclude)))
    return RecordedCandidate(
        path=str(candidate.resolve()), exclude=tuple(exclude), digest=manifest.digest
    )


def checked_manifest(candidate: RecordedCandidate) -> Manifest:
    """The candidate's manifest now, which must still have the digest recorded at PREPARED:
    vibesys never runs code other than what it recorded."""
    try:
        manifest = build_manifest(candidate.path, SnapshotPolicy(exclude=candidate.exclude))
    except CandidateError as exc:
        raise BackendMisconfigured(
            f"the candidate cannot be snapshotted: {exc}",
            fix=f"restore {candidate.path}, or run again with the candidate as it is now",
        ) from None
    if manifest.digest != candidate.digest:
        raise BackendMisconfigured(
            f"the candidate {candidate.path} changed since it was recorded (digest "
            f"{candidate.digest}, now {manifest.digest})",
            fix="run again to record the candidate as it is now",
        )
    return manifest
