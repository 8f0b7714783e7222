"""Adapters: side effects (local processes, Slurm, SkyPilot). They speak RemoteStatus and never
import the journal or the engine. Concrete adapters are imported lazily, by name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vibesys.adapters.base import (
    Backend,
    JobRef,
    RemoteState,
    RemoteStatus,
    SubmitReceipt,
    SubmitRequest,
)
from vibesys.errors import UsageError

#: Adapters `vibesys run --adapter` accepts. Known without importing any of them.
ADAPTER_NAMES = ("local",)


def get_backend(name: str, options: Mapping[str, Any]) -> Backend:
    """Build the adapter called `name`, importing its module only now."""
    if name == "local":
        from vibesys.adapters.local import LocalBackend

        return LocalBackend()
    raise UsageError(f"unknown adapter {name!r} (choose from {', '.join(ADAPTER_NAMES)})")


__all__ = [
    "ADAPTER_NAMES",
    "Backend",
    "JobRef",
    "RemoteState",
    "RemoteStatus",
    "SubmitReceipt",
    "SubmitRequest",
    "get_backend",
]
