"""Adapters: side effects (local processes, Slurm, SkyPilot). They speak RemoteStatus and never
import the journal or the engine. Concrete adapters are imported lazily, through the registry
(`vibesys.adapters.registry`); importing this package loads none of them."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vibesys.adapters.base import (
        Backend,
        JobContext,
        JobRef,
        RemoteState,
        RemoteStatus,
        SubmitReceipt,
        SubmitRequest,
    )
    from vibesys.adapters.rundir.claim import Claim

_PUBLIC = {
    "Backend": "vibesys.adapters.base",
    "Claim": "vibesys.adapters.rundir.claim",
    "JobContext": "vibesys.adapters.base",
    "JobRef": "vibesys.adapters.base",
    "RemoteState": "vibesys.adapters.base",
    "RemoteStatus": "vibesys.adapters.base",
    "SubmitReceipt": "vibesys.adapters.base",
    "SubmitRequest": "vibesys.adapters.base",
}


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'vibesys.adapters' has no attribute {name!r}")


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
