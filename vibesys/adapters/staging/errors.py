"""What can go wrong while staging a snapshot on the cluster, in the project's error tree."""

from __future__ import annotations

from vibesys.errors import BackendError, BackendMisconfigured

__all__ = ["SnapshotMismatch", "StagingFailed"]


class StagingFailed(BackendMisconfigured):
    """The remote side could not store the snapshot (no python3 there, no space, no
    permission, a malformed answer). Nothing half-done is left in place; a person must act."""


class SnapshotMismatch(BackendError):
    """A snapshot was uploaded but its digest did not verify on the remote side: bytes were
    damaged in transit or on the remote disk. An infrastructure error; staging again may fix it."""

    retryable = True
