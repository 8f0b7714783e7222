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
ADAPTER_NAMES = ("local", "sbatch", "srun")
#: Adapters that run on Slurm and need a site configuration (slurm.toml).
SLURM_ADAPTERS = ("sbatch", "srun")


def get_backend(name: str, options: Mapping[str, Any]) -> Backend:
    """Build the adapter called `name`, importing its module only now."""
    if name == "local":
        from vibesys.adapters.local import LocalBackend

        return LocalBackend()
    if name in SLURM_ADAPTERS:
        from vibesys.config import load_slurm_config

        config = load_slurm_config(options.get("site_config"))
        if name == "sbatch":
            from vibesys.adapters.slurm.sbatch import SbatchBackend

            return SbatchBackend(config)
        from vibesys.adapters.slurm.srun import SrunBackend

        return SrunBackend(config)
    raise UsageError(f"unknown adapter {name!r} (choose from {', '.join(ADAPTER_NAMES)})")


__all__ = [
    "ADAPTER_NAMES",
    "SLURM_ADAPTERS",
    "Backend",
    "JobRef",
    "RemoteState",
    "RemoteStatus",
    "SubmitReceipt",
    "SubmitRequest",
    "get_backend",
]
