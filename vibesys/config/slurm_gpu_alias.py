"""The deprecated `slurm-gpu` run environment: its `[slurm_gpu]` table, translated once.

`translate_slurm_gpu` is pure: the old table in, the new settings out (a `SlurmSiteConfig` with
`[vibesys.agent_gpu]`, the sizing of the trusted sbatch evaluation, and the one deprecation
warning for the caller to print when the run starts). A key that cannot be carried over is
rejected by name.

    partitions, max_gpus, max_time_minutes,     the same keys of [vibesys.agent_gpu]
    default_time_minutes, windows_command,      (srun_arguments reach the agent's jobs only,
    job_name_prefix, srun_arguments,            never the gates)
    read_only_paths, max_concurrent_jobs
    srun_command, scancel_command               [slurm.transport] shell_command: the wrapper
                                                before srun/scancel (the same for both) + bash -c
    gate_gpus / gate_time_minutes               the gate's --gres=gpu:N / --time=M (Slurm's
                                                limit bounds the run; the queue is waited out)
    partitions (for gates)                      the gate's --partition=A,B,...
    (none)                                      transport kind "local", remote_workspace_root
                                                ~/.cache/vibesys/slurm-gpu-stage
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any, Final

from msgspec import Struct
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vibesys.config.load import format_error
from vibesys.config.slurm import AgentGpuConfig, SlurmSiteConfig
from vibesys.config.strict import StrTuple
from vibesys.errors import ConfigError

__all__ = [
    "DEPRECATION_WARNING",
    "GateSizing",
    "SlurmGpuTable",
    "TranslatedSlurmGpu",
    "translate_slurm_gpu",
]

DEPRECATION_WARNING: Final = (
    "--run-environment slurm-gpu is deprecated: its [slurm_gpu] table was translated to "
    "--run-environment slurm with [slurm], [slurm.transport] and [vibesys.agent_gpu]; "
    "move to a slurm.toml (see the operator documentation)"
)
#: Where the gates stage their copy of the workspace (shared with the compute nodes).
STAGE_DIR: Final = ".cache/vibesys/slurm-gpu-stage"
_CARRIED: Final = (
    "partitions",
    "max_gpus",
    "max_time_minutes",
    "default_time_minutes",
    "windows_command",
    "job_name_prefix",
    "srun_arguments",
    "read_only_paths",
    "max_concurrent_jobs",
)


class SlurmGpuTable(BaseModel):
    """The old `[slurm_gpu]` table, read strictly: an unknown key is refused by name."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)

    partitions: StrTuple = Field(min_length=1)
    max_gpus: int
    max_time_minutes: int
    default_time_minutes: int
    windows_command: StrTuple | None = None
    job_name_prefix: str | None = None
    srun_arguments: StrTuple = ()
    read_only_paths: StrTuple = ()
    max_concurrent_jobs: int | None = None
    srun_command: StrTuple = ("srun",)
    scancel_command: StrTuple = ("scancel",)
    gate_gpus: int | None = Field(default=None, ge=0)
    gate_time_minutes: int = Field(gt=0)


class GateSizing(Struct, frozen=True):
    """The trusted evaluation's sbatch job, as the old table sized it."""

    #: --gres=gpu:N; None: the task's [resources] accelerators per node decide
    gpus: int | None
    time_minutes: int
    #: the scheduler starts the gate in whichever of these starts it earliest
    partitions: tuple[str, ...]
    #: a gate asking for more GPUs than the old table's max_gpus is refused
    max_gpus: int


class TranslatedSlurmGpu(Struct, frozen=True):
    site: SlurmSiteConfig
    gate: GateSizing
    warning: str


def translate_slurm_gpu(table: Mapping[str, Any], *, home: str) -> TranslatedSlurmGpu:
    """The new settings for the old `[slurm_gpu]` table; `home` is the operator's home
    directory (the stage directory lives under it). ConfigError names the offending key."""
    old = _validate(table)
    wrapper = _shared_wrapper(old.srun_command, old.scancel_command)
    if old.gate_gpus is not None and old.gate_gpus > old.max_gpus:
        raise ConfigError(f"slurm_gpu.gate_gpus: {old.gate_gpus} exceeds max_gpus ({old.max_gpus})")
    agent = {key: getattr(old, key) for key in _CARRIED if key in old.model_fields_set}
    site = {
        "slurm": {
            "name": "slurm-gpu",
            "remote_workspace_root": posixpath.join(home, STAGE_DIR),
            "transport": {"kind": "local", "shell_command": (*wrapper, "bash", "-c")},
        },
        "vibesys": {"agent_gpu": agent},
    }
    try:
        AgentGpuConfig.model_validate(agent)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        raise ConfigError(f"slurm_gpu.{format_error(error, AgentGpuConfig)}") from None
    try:
        config = SlurmSiteConfig.model_validate(site)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        raise ConfigError(
            f"slurm_gpu, as translated: {format_error(error, SlurmSiteConfig)}"
        ) from None
    gate = GateSizing(
        gpus=old.gate_gpus,
        time_minutes=old.gate_time_minutes,
        partitions=old.partitions,
        max_gpus=old.max_gpus,
    )
    return TranslatedSlurmGpu(config, gate, DEPRECATION_WARNING)


def _validate(table: Mapping[str, Any]) -> SlurmGpuTable:
    try:
        return SlurmGpuTable.model_validate(dict(table))
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        error = errors[0]
        if error["type"] == "extra_forbidden":
            key = ".".join(str(part) for part in error["loc"])
            raise ConfigError(
                f"slurm_gpu.{key}: unknown key, cannot be carried over to slurm.toml "
                f"(known: {', '.join(SlurmGpuTable.model_fields)})"
            ) from None
        raise ConfigError(f"slurm_gpu.{format_error(error, SlurmGpuTable)}") from None


def _shared_wrapper(srun: tuple[str, ...], scancel: tuple[str, ...]) -> tuple[str, ...]:
    """What precedes `srun` and `scancel`: it must be the same for both."""
    commands = (("srun_command", srun, "srun"), ("scancel_command", scancel, "scancel"))
    for key, argv, program in commands:
        if not argv or posixpath.basename(argv[-1]) != program:
            raise ConfigError(f"slurm_gpu.{key}: {list(argv)!r} must end in {program}")
    if srun[:-1] != scancel[:-1]:
        raise ConfigError(
            f"slurm_gpu.srun_command and scancel_command must carry the same wrapper "
            f"(before srun: {list(srun[:-1])!r}, before scancel: {list(scancel[:-1])!r})"
        )
    return srun[:-1]
