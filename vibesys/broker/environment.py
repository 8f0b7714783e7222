"""The environment of a confined GPU command (pure).

The job runs in the host's environment, not the container's: it gets the host's baseline
variables (PATH, locale, time zone, the host user's identity), plus what the agent passed,
minus what only makes sense in the container (its identity, its paths), its device variables
(the container has no GPUs; Slurm assigns the job's own on the node), every variable that
steers Slurm, and the broker's own variables (the token among them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = ["CONTAINER_IDENTITY", "DEVICE_VARIABLES", "HOST_BASELINE", "job_environment"]

#: Taken from the host (the broker's environment) when set there.
HOST_BASELINE: Final = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TERM"}
    | {
        "LC_ALL",
        "LC_CTYPE",
        "LC_COLLATE",
        "LC_MESSAGES",
        "LC_MONETARY",
        "LC_NUMERIC",
        "LC_TIME",
    }
)
#: The container's identity and paths: meaningless (or misleading) on the host.
CONTAINER_IDENTITY: Final = frozenset(
    {
        "HOSTNAME",
        "HOME",
        "USER",
        "LOGNAME",
        "USERNAME",
        "UID",
        "EUID",
        "GID",
        "PWD",
        "OLDPWD",
        "SHLVL",
        "SHELL",
        "MAIL",
        "PATH",
        "TMPDIR",
        "_",
    }
)
#: Device selection: the job's GPUs are the ones Slurm allocated, never the container's.
DEVICE_VARIABLES: Final = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        "NVIDIA_REQUIRE_CUDA",
        "ROCR_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "GPU_DEVICE_ORDINAL",
        "ZE_AFFINITY_MASK",
        "ONEAPI_DEVICE_SELECTOR",
    }
)
#: Prefixes of variables that are never passed on: Slurm's, and the broker's own.
_DROPPED_PREFIXES: Final = ("SLURM_", "SBATCH_", "SRUN_", "SALLOC_", "VIBESYS_GPU")


def _dropped(name: str) -> bool:
    return (
        name in CONTAINER_IDENTITY or name in DEVICE_VARIABLES or name.startswith(_DROPPED_PREFIXES)
    )


def job_environment(host: Mapping[str, str], agent: Mapping[str, str]) -> dict[str, str]:
    """The variables a confined job gets: the host baseline, then the agent's own, filtered."""
    baseline = {name: host[name] for name in sorted(HOST_BASELINE) if name in host}
    passed = {name: value for name, value in agent.items() if not _dropped(name)}
    return baseline | passed
