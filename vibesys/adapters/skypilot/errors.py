"""SkyPilot's failures as vibesys error types. Decisions read the type and its attributes
(`retryable`, `maybe_submitted`), never the text; every message is redacted before it is built."""

from __future__ import annotations

from vibesys.errors import BackendUnavailable, ConfigError, SubmitRejected

__all__ = [
    "ClusterGone",
    "ClusterIncompatible",
    "SkyCommandFailed",
    "SkyMalformedOutput",
    "SkyNotInstalled",
    "SkyTimeout",
    "SkyVersionMismatch",
]


class SkyVersionMismatch(ConfigError):
    """The SkyPilot found is not the pinned version; vibesys refuses to drive it."""


class SkyNotInstalled(BackendUnavailable):
    """No `sky` executable (or interpreter) where the adapter was told to look. Nothing ran."""

    retryable = False

    def __init__(self, message: str, *, evidence: str = "") -> None:
        super().__init__(message, evidence=evidence, maybe_submitted=False)


class SkyTimeout(BackendUnavailable):
    """A `sky` command did not answer in time. The API server may still carry the request out,
    so an exec or launch that timed out may have taken effect (`maybe_submitted`)."""

    retryable = True


class SkyCommandFailed(BackendUnavailable):
    """A control-plane command exited non-zero for a reason vibesys does not read as proof."""

    retryable = True

    def __init__(
        self, message: str, *, returncode: int, evidence: str = "", maybe_submitted: bool = False
    ) -> None:
        super().__init__(message, evidence=evidence, maybe_submitted=maybe_submitted)
        self.returncode = returncode


class SkyMalformedOutput(BackendUnavailable):
    """A `sky` command answered in words vibesys does not read. Asking again will not help."""

    retryable = False


class ClusterGone(BackendUnavailable):
    """The cluster does not exist (any more): its allocation ended or it was never launched.
    Proven: the command that said so did nothing. Retried on a relaunched cluster."""

    retryable = True

    def __init__(self, message: str, *, evidence: str = "") -> None:
        super().__init__(message, evidence=evidence, maybe_submitted=False)


class ClusterIncompatible(SubmitRejected):
    """A cluster of that name exists but cannot serve the request; nothing was launched."""
