"""Pure generation of the SkyPilot tasks vibesys hands to `sky launch` and `sky exec`.

Tasks are written as JSON, which YAML reads as it is (SkyPilot loads task files with a YAML
parser): no YAML library, and no quoting rules of our own. A contract test runs every task this
module makes through SkyPilot's own task parser.

- The launch task has resources and no `run`: it only creates (or finds) the allocation.
- The exec task runs the attempt program once, on the head node, with the node's resources; a
  multi-node evaluation spreads itself from there (the profile's `command_prefix`, e.g.
  `srun --overlap --nodes=N ...`), so exactly one process claims the attempt.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from vibesys.adapters.skypilot.wrapper import attempt_program
from vibesys.config.resources import EffectiveResources

__all__ = ["exec_task", "launch_task", "render_task", "run_section"]

#: The environment variable through which the job learns its cluster's name (for its claim).
CLUSTER_ENV = "VIBESYS_SKY_CLUSTER"


def _resources(effective: EffectiveResources) -> dict[str, Any]:
    resources: dict[str, Any] = {"infra": effective.infra}
    if effective.cpus_per_node is not None:
        resources["cpus"] = effective.cpus_per_node
    if effective.accelerators_per_node > 0 and effective.accelerator_type is not None:
        resources["accelerators"] = (
            f"{effective.accelerator_type}:{effective.accelerators_per_node}"
        )
    return resources


def launch_task(effective: EffectiveResources, cluster: str) -> dict[str, Any]:
    """The task `sky launch -c CLUSTER` gets: the allocation's shape and wall time, no job."""
    sbatch: dict[str, Any] = {"time": effective.allocation_time}
    if effective.exclusive:
        sbatch["exclusive"] = True
    return {
        "name": f"{cluster}-lease",
        "num_nodes": effective.nodes,
        "resources": _resources(effective),
        "config": {"slurm": {"sbatch_options": sbatch}},
    }


def run_section(
    program: str,
    remote_attempt_dir: PurePosixPath,
    command: Sequence[str],
    prefix: Sequence[str] = (),
    setup: str = "",
) -> str:
    """The task's `run:` text: `program` (a `bash -c` program taking D, the setup line and the
    argv) applied to the remote attempt directory, `setup` and `prefix + command`, every word
    shell-quoted."""
    if not command:
        raise ValueError("empty command")
    words = [*prefix, *command]
    if any("\0" in word for word in [*words, setup]):
        raise ValueError("an argument holds a NUL byte, which no command line can carry")
    argv = ["bash", "-c", program, "vibesys-sky", str(remote_attempt_dir), setup, *words]
    return "exec " + " ".join(shlex.quote(word) for word in argv) + "\n"


def exec_task(
    effective: EffectiveResources,
    *,
    job_name: str,
    cluster: str,
    remote_attempt_dir: PurePosixPath,
    command: Sequence[str],
    setup: str = "",
    envs: Mapping[str, str] | None = None,
    program: str | None = None,
) -> dict[str, Any]:
    """The task `sky exec CLUSTER` gets for one attempt. It has no `workdir`: SkyPilot syncs
    nothing; the candidate was staged as a snapshot and `setup` copies and verifies it."""
    task: dict[str, Any] = {
        "name": job_name,
        "num_nodes": 1,
        "resources": _resources(effective),
        "envs": {**(envs or {}), CLUSTER_ENV: cluster},
        "run": run_section(
            program if program is not None else attempt_program(),
            remote_attempt_dir,
            command,
            effective.command_prefix,
            setup,
        ),
    }
    return task


def render_task(task: Mapping[str, Any]) -> str:
    """The task file's text (JSON, read by SkyPilot as YAML)."""
    return json.dumps(task, indent=2, sort_keys=True, ensure_ascii=True) + "\n"
