"""What a session offers its agent (`vibesys-eval capabilities`): one strict, frozen pydantic
model, made from the site the session resolved when it started and the session's options. Its
JSON Schema is docs/capabilities.schema.json (generated, `python docs/gen_docs.py`).

Everything comes from the configuration as the session read it: no scheduler is asked, so a
limit the configuration does not state (a partition's time limit Slurm alone knows) is None.
The bridge's `capabilities` reply carries `model_dump(mode="json")`; the agent's runtime notes
are rendered from it (`vibesys.bridge.notes`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from vibesys.adapters.slurm.limits import sbatch_sizing
from vibesys.adapters.slurm.site_parse import parse_slurm_minutes
from vibesys.bridge.protocol import KINDS, PROFILE, PROTOCOL_VERSION
from vibesys.bridge.site import Site
from vibesys.config.slurm import AgentGpuConfig
from vibesys.config.strict import StrTuple

__all__ = ["GpuCommands", "Partition", "SessionCapabilities", "session_capabilities"]

# Strict and frozen as every edge model; sequences arrive as JSON arrays (lax container only).
_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)


class Partition(BaseModel):
    """A Slurm partition the site configuration names, and its time limit if it states one."""

    model_config = _STRICT

    name: str = Field(description="The partition's name.")
    time_limit_minutes: int | None = Field(
        description="The time limit the site configuration gives its jobs there (`--time` in "
        "[slurm] sbatch_arguments); None: the configuration does not say (the scheduler knows)."
    )


class GpuCommands(BaseModel):
    """`vibesys-gpu`'s limits (the Slurm site's `[vibesys.agent_gpu]`)."""

    model_config = _STRICT

    max_gpus: int = Field(description="Most GPUs one command may request.")
    max_time_minutes: int = Field(description="Longest time limit one command may request.")
    default_time_minutes: int = Field(description="A command's time limit when it names none.")
    max_concurrent_jobs: int | None = Field(
        description="At most this many of the campaign's GPU jobs are submitted at once; "
        "None: no cap."
    )
    partitions: tuple[Partition, ...] = Field(
        description="The partitions a command may run in, in preference order."
    )
    read_only_paths: StrTuple = Field(
        description="Host paths a GPU command reads (never writes) besides the workspace and the "
        "host's system directories: it runs in the host's environment, not the container's."
    )


class SessionCapabilities(BaseModel):
    """What one session offers: where evaluations run, their limits, and the agent's own GPU
    commands. Every key the untyped reply had is kept, with its meaning."""

    model_config = _STRICT

    protocol_version: int = Field(description="The bridge protocol's version.")
    run: str = Field(description="The campaign (run id).")
    workspace: str = Field(description="The candidate's workspace, as the container sees it.")
    backend: Literal["local", "slurm", "skypilot"] = Field(
        description="Where evaluations run: this host, a Slurm site (sbatch), a SkyPilot cluster."
    )
    cluster: str | None = Field(
        description="The Slurm site's name or the campaign's SkyPilot cluster; None: this host."
    )
    local_confined: bool | None = Field(
        description="Whether a local evaluation runs sandboxed to its copy of the candidate; "
        "None: evaluations run elsewhere."
    )
    accelerator_type: str | None = Field(description="The accelerator's name, if known.")
    accelerators_per_node: int = Field(description="Accelerators an evaluation gets per node.")
    accelerator_backend: str | None = Field(description="Their software stack (cuda, rocm).")
    nodes: int = Field(description="Nodes per evaluation.")
    cpus_per_node: int | None = Field(description="CPUs per node, if known.")
    allocation_time: str | None = Field(
        description="Wall time of the allocation that holds a SkyPilot cluster ([D-]HH:MM:SS)."
    )
    default_timeout_seconds: int = Field(description="An evaluation's timeout when it names none.")
    max_timeout_seconds: int = Field(
        description="The longest timeout an evaluation may ask (the session's limit; longer is "
        "refused, never clamped)."
    )
    partitions: tuple[Partition, ...] = Field(
        default=(),
        description="The partitions evaluations run in, as the site configuration names them; "
        "empty: the scheduler's default, or not a Slurm cluster.",
    )
    kinds: StrTuple = Field(
        description="The evaluation kinds (`--kind`); `profile` only where a profiler is offered."
    )
    env: StrTuple = Field(description="The variables a request may pass (`--env NAME`).")
    results_dir: str | None = Field(
        description="Where each evaluation's result, logs and artifacts land "
        "(`<results_dir>/<invocation>/`), as the container sees it (mounted at the same path)."
    )
    gpu_commands: bool = Field(description="Whether `vibesys-gpu` is offered in this session.")
    gpu_limits: GpuCommands | None = Field(
        default=None, description="`vibesys-gpu`'s limits when it is offered."
    )
    profilers: StrTuple = Field(
        default=(),
        description="The profilers offered, by name (the site's [vibesys.agent_gpu.profilers]): "
        "`vibesys-eval --kind profile --profiler NAME` and `vibesys-gpu --profile NAME`; "
        "empty: none.",
    )
    remote_profiling: bool = Field(
        description="Whether an evaluation may be a profile (`--kind profile`): a profiler is "
        "offered."
    )


def session_capabilities(
    site: Site,
    *,
    run: str,
    workspace: str,
    default_timeout: int,
    max_timeout: int,
    env: tuple[str, ...],
    results_dir: Path | None,
) -> SessionCapabilities:
    """The capabilities of a session on `site` with these options."""
    agent = site.slurm_file.config.agent_gpu if site.slurm_file is not None else None
    profilers = tuple(sorted(site.profilers()))
    return SessionCapabilities(
        protocol_version=PROTOCOL_VERSION,
        run=run,
        workspace=workspace,
        **site.capabilities(),
        default_timeout_seconds=default_timeout,
        max_timeout_seconds=max_timeout,
        partitions=evaluation_partitions(site),
        kinds=KINDS if profilers else tuple(kind for kind in KINDS if kind != PROFILE),
        env=tuple(sorted(env)),
        results_dir=None if results_dir is None else str(results_dir),
        gpu_commands=site.agent_gpu,
        gpu_limits=gpu_limits(agent) if site.agent_gpu and agent is not None else None,
        profilers=profilers,
        remote_profiling=bool(profilers),
    )


def gpu_limits(agent: AgentGpuConfig) -> GpuCommands:
    # sinfo alone knows the partitions' time limits: a command longer than one's goes to the next.
    return GpuCommands(
        max_gpus=agent.max_gpus,
        max_time_minutes=agent.max_time_minutes,
        default_time_minutes=agent.default_time_minutes,
        max_concurrent_jobs=agent.max_concurrent_jobs,
        partitions=tuple(Partition(name=p, time_limit_minutes=None) for p in agent.partitions),
        read_only_paths=agent.read_only_paths,
    )


def evaluation_partitions(site: Site) -> tuple[Partition, ...]:
    """The partitions the site configuration sends evaluations to: a Slurm site's
    `sbatch_arguments` (or the deprecated `[slurm_gpu]` gate's), a SkyPilot infra's third part."""
    if site.effective is not None:
        parts = site.effective.infra.split("/")
        return (Partition(name=parts[2], time_limit_minutes=None),) if len(parts) == 3 else ()
    if site.slurm_file is None:
        return ()
    names, time_limit = sbatch_sizing(site.slurm_file.config.slurm.sbatch_arguments)
    limit = _minutes(time_limit)
    gate = site.slurm_file.gate
    if not names and gate is not None:
        names = gate.partitions
    return tuple(Partition(name=name, time_limit_minutes=limit) for name in names)


def _minutes(time_limit: str | None) -> int | None:
    """A `--time` of sbatch_arguments in minutes (None when absent or unreadable: `vibesys
    check` names a bad one; here it is merely unknown)."""
    if time_limit is None:
        return None
    try:
        return parse_slurm_minutes(time_limit)
    except ValueError:
        return None
