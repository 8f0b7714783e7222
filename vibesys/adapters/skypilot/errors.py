"""SkyPilot's failures as vibesys error types. The engine decides from three fields only
(`maybe_submitted`, `retryable`, `fix`, see `vibesys.engine.execute`), never from the text;
every message is redacted before it is built.

| error                | maybe_submitted         | retryable | the submit becomes          |
|----------------------|-------------------------|-----------|-----------------------------|
| SkyNotInstalled      | no                      | no (fix)  | Misconfigured               |
| SkyVersionMismatch   | no                      | no (fix)  | Misconfigured               |
| SkyProfileError      | no                      | no (fix)  | Misconfigured               |
| SkyTimeout           | exec/launch: yes        | yes       | OutcomeUnknown (then found  |
|                      | other commands: no      |           | by name, or fenced)         |
| SkyCommandFailed     | exec/launch: yes        | yes       | OutcomeUnknown              |
| SkyMalformedOutput   | exec: yes               | no (fix)  | OutcomeUnknown              |
| ClusterGone          | no (the command said so)| yes       | InfraFailed, retried        |
| ClusterIncompatible  | no                      | no        | Rejected                    |
| LaunchRefused        | no (Slurm refused it)   | no        | Rejected                    |
| CredentialRefused    | exec/launch: yes        | no (fix)  | OutcomeUnknown (exec,       |
| (sky's ssh refused,  | other commands: no      |           | launch); Misconfigured      |
|  `ops.SkyOps._fail`) |                         |           | before                      |
"""

from __future__ import annotations

from typing import Final

from vibesys.errors import BackendMisconfigured, BackendUnavailable, SubmitRejected

__all__ = [
    "ClusterGone",
    "ClusterIncompatible",
    "LaunchRefused",
    "SkyCommandFailed",
    "SkyMalformedOutput",
    "SkyNotInstalled",
    "SkyProfileError",
    "SkyTimeout",
    "SkyVersionMismatch",
]

INSTALL_FIX: Final = (
    "install the pinned SkyPilot with scripts/skypilot-env (or set VIBESYS_SKY_VENV to it)"
)


class SkyNotInstalled(BackendMisconfigured):
    """No `sky` executable (or interpreter) where the adapter was told to look. Nothing ran."""

    def __init__(self, message: str, *, evidence: str = "") -> None:
        super().__init__(message, evidence=evidence, maybe_submitted=False, fix=INSTALL_FIX)


class SkyVersionMismatch(BackendMisconfigured):
    """The SkyPilot found is not the pinned version; vibesys refuses to drive it."""

    def __init__(self, message: str) -> None:
        super().__init__(message, maybe_submitted=False, fix=INSTALL_FIX)


class SkyProfileError(BackendMisconfigured):
    """The operator's profile (clusters.toml) or SkyPilot's login configuration cannot serve
    the recorded request any more (read when an invocation is resumed), or its allocation_time
    fits no partition it may use (found before a launch, see `limits.py`)."""


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
    """A `sky` command answered in words vibesys does not read. Asking again will not help: the
    pinned version prints what the parsers read, so a person must look."""

    retryable = False

    def __init__(
        self, message: str, *, evidence: str = "", maybe_submitted: bool | None = None
    ) -> None:
        super().__init__(
            message,
            evidence=evidence,
            maybe_submitted=maybe_submitted,
            fix="check that the pinned SkyPilot answers (scripts/skypilot-env check) and "
            "report the output quoted in the evidence",
        )


class ClusterGone(BackendUnavailable):
    """The cluster does not exist (any more): its allocation ended or it was never launched.
    Proven: the command that said so did nothing. Retried on a relaunched cluster."""

    retryable = True

    def __init__(self, message: str, *, evidence: str = "") -> None:
        super().__init__(message, evidence=evidence, maybe_submitted=False)


class ClusterIncompatible(SubmitRejected):
    """A cluster of that name exists but cannot serve the request; nothing was launched."""


class LaunchRefused(SubmitRejected):
    """Slurm refused the allocation's sbatch for the request itself (its time, partition,
    QOS...), as `sky launch` relays it: nothing was launched, and launching again cannot help.
    Never read as an outage (which would be retried, then end TRANSPORT_LOST)."""

    def __init__(self, message: str, *, evidence: str = "", fix: str = "") -> None:
        super().__init__(message, evidence=evidence, maybe_submitted=False, fix=fix)
