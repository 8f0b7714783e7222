"""Adapters: side effects (local processes, Slurm, SkyPilot). They speak RemoteStatus and never
import the journal or the engine. Concrete adapters are imported lazily, through the registry
(`vibesys.adapters.registry`)."""

from __future__ import annotations

from vibesys.adapters.base import (
    Backend,
    JobContext,
    JobRef,
    RemoteState,
    RemoteStatus,
    SubmitReceipt,
    SubmitRequest,
)
from vibesys.adapters.claim import Claim

__all__ = [
    "Backend",
    "Claim",
    "JobContext",
    "JobRef",
    "RemoteState",
    "RemoteStatus",
    "SubmitReceipt",
    "SubmitRequest",
]
