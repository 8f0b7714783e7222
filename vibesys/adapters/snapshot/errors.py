"""What can go wrong with a snapshot, in the project's error tree."""

from __future__ import annotations

from vibesys.errors import BackendError, UsageError

__all__ = ["CandidateError", "SnapshotMismatch", "StagingFailed"]


class CandidateError(UsageError):
    """The candidate directory cannot be snapshotted as it is: it is missing or unreadable, or
    it changed between `build_manifest` and `stage` (build the manifest again)."""


class StagingFailed(BackendError):
    """The remote side could not store the snapshot (no python3 there, no space, no
    permission, a malformed answer). Nothing half-done is left in place."""

    retryable = False


class SnapshotMismatch(BackendError):
    """A snapshot was uploaded but its digest did not verify on the remote side: bytes were
    damaged in transit or on the remote disk. An infrastructure error; staging again may fix it."""

    retryable = True
