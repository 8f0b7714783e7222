"""A person's request for Slurm resources, checked against the operator's limits.

Over-limit requests are rejected, never clamped: a job silently given less time or fewer GPUs
than asked for fails later in a way that is much harder to understand.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from vibesys.config.slurm import AgentGpuConfig
from vibesys.errors import UsageError

if TYPE_CHECKING:
    from vibesys.config.slurm_gpu_alias import GateSizing

__all__ = ["AskedSizing", "CheckedSizing", "TrustedSizing", "check_sizing", "check_trusted"]


class AskedSizing(BaseModel):
    """What was asked for (`--gpus N --time MINUTES --partition P`), not yet checked."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)

    gpus: int = Field(default=0, description="GPUs for the job (generic resource gpu:N).")
    time_minutes: int | None = Field(
        default=None, description="Time limit; None means the configured default."
    )
    partition: str | None = Field(
        default=None, description="One partition; None means the configured preference list."
    )


class CheckedSizing(BaseModel):
    """A request within the limits, with the defaults filled in."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)

    gpus: int = Field(ge=0, description="GPUs for the job.")
    time_minutes: int = Field(gt=0, description="Time limit in whole minutes.")
    partitions: tuple[str, ...] = Field(
        description="Candidate partitions in preference order; empty lets Slurm choose."
    )


class TrustedSizing(BaseModel):
    """A trusted evaluation's sizing: what was asked, with a `[slurm_gpu]` gate's defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)

    gpus: int = Field(ge=0)
    time_minutes: int | None = Field(gt=0, description="None: the partition's default.")
    partitions: tuple[str, ...]


def _well_formed(asked: AskedSizing) -> None:
    if asked.gpus < 0:
        raise UsageError(f"--gpus {asked.gpus}: must be 0 or more")
    if asked.time_minutes is not None and asked.time_minutes <= 0:
        raise UsageError(f"--time {asked.time_minutes}: must be at least 1 minute")
    if asked.partition is not None and not asked.partition:
        raise UsageError("--partition: must not be empty")


def check_trusted(asked: AskedSizing, gate: GateSizing | None) -> TrustedSizing:
    """Size a trusted sbatch evaluation. The agent's limits ([vibesys.agent_gpu]) never apply:
    the task asks for what it needs, and the scheduler refuses what the site cannot give (the
    invocation then ends REJECTED). A deprecated `[slurm_gpu]` table (`gate`) fills in its
    gate's GPUs, time and partitions, and refuses more GPUs than its max_gpus."""
    _well_formed(asked)
    gpus, time_minutes = asked.gpus, asked.time_minutes
    partitions: tuple[str, ...] = (asked.partition,) if asked.partition else ()
    if gate is not None:
        if not gpus and gate.gpus:
            gpus = gate.gpus
        if gpus > gate.max_gpus:
            raise UsageError(
                f"--gpus {gpus} exceeds slurm_gpu.max_gpus ({gate.max_gpus}), the limit the "
                "deprecated [slurm_gpu] table sets for gates"
            )
        time_minutes = time_minutes or gate.time_minutes
        partitions = partitions or gate.partitions
    return TrustedSizing(gpus=gpus, time_minutes=time_minutes, partitions=partitions)


def check_sizing(asked: AskedSizing, limits: AgentGpuConfig | None) -> CheckedSizing:
    """Fill in defaults and check `request` against `limits` ([vibesys.agent_gpu], or None
    when the file has no such table). Raises UsageError naming the offending value."""
    _well_formed(asked)
    time_minutes = asked.time_minutes
    if limits is None:
        if time_minutes is None:
            raise UsageError("--time is required: slurm.toml has no [vibesys.agent_gpu] table")
        chosen: tuple[str, ...] = (asked.partition,) if asked.partition else ()
        return CheckedSizing(gpus=asked.gpus, time_minutes=time_minutes, partitions=chosen)
    if asked.gpus > limits.max_gpus:
        raise UsageError(
            f"--gpus {asked.gpus} exceeds vibesys.agent_gpu.max_gpus ({limits.max_gpus})"
        )
    if time_minutes is None:
        time_minutes = limits.default_time_minutes
    elif time_minutes > limits.max_time_minutes:
        raise UsageError(
            f"--time {time_minutes} exceeds vibesys.agent_gpu.max_time_minutes "
            f"({limits.max_time_minutes})"
        )
    partitions: tuple[str, ...]
    if asked.partition is None:
        partitions = limits.partitions
    elif asked.partition in limits.partitions:
        partitions = (asked.partition,)
    else:
        raise UsageError(
            f"--partition {asked.partition} is not one of vibesys.agent_gpu.partitions "
            f"({', '.join(limits.partitions)})"
        )
    return CheckedSizing(gpus=asked.gpus, time_minutes=time_minutes, partitions=partitions)
