"""What can go wrong with a candidate before anything is sent anywhere."""

from __future__ import annotations

from vibesys.errors import UsageError

__all__ = ["CandidateError"]


class CandidateError(UsageError):
    """The candidate directory cannot be snapshotted as it is: it is missing or unreadable, or
    it changed between `build_manifest` and `stage` (build the manifest again)."""
