"""How long a site check may take, and when a certificate is old enough to warn about."""

from __future__ import annotations

import time
from collections.abc import Callable

from msgspec import Struct

__all__ = ["CheckOptions"]


class CheckOptions(Struct, frozen=True):
    #: the longest any one command (or the login) may take
    timeout_seconds: float = 15.0
    #: how long the compute-node job may take, from its submission to its reply (queue + run)
    job_wait_seconds: float = 60.0
    #: after the job ended, how long its reply may take to appear (a network file system's
    #: attribute cache)
    reply_grace_seconds: float = 10.0
    #: warn when the SSH certificate expires within this many days
    cert_warn_days: float = 7.0
    #: the wall clock, epoch seconds (certificates)
    now: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        for name in ("timeout_seconds", "job_wait_seconds"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")
        for name in ("reply_grace_seconds", "cert_warn_days"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must not be negative")
