"""The experiment's portable resource request (`[resources]`) and the operator's cluster profiles
(`~/.config/vibesys/clusters.toml`, `[profiles.NAME]`), and the pure rule that joins them.

The request names no cluster, provider, partition, account, path or GPU model: it says how much
(`nodes`, `accelerators_per_node`) and of which software stack (`accelerator_backend`, e.g.
"rocm"). A profile says where and how (`infra`, `accelerator_type`, `command_prefix`, ...). A
profile may fill what the request leaves open and constrain what it asks, and fails clearly when
the two disagree. Nothing here has a site-specific default.
"""

from __future__ import annotations

import posixpath
import re
from typing import Annotated, Literal

from msgspec import Meta, Struct
from pydantic import BaseModel, ConfigDict, Field, field_validator

from vibesys.errors import UsageError

__all__ = [
    "ClustersFile",
    "EffectiveResources",
    "IncompatibleProfile",
    "PortableResources",
    "SkyPilotProfile",
    "resolve_resources",
]

_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)
StrTuple = Annotated[tuple[str, ...], Field(strict=False)]

_BACKEND = re.compile(r"[a-z][a-z0-9_-]*")
_PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# slurm, slurm/<ssh host alias>, slurm/<alias>/<partition>; likewise for other SkyPilot infras.
_INFRA = re.compile(r"[a-z][a-z0-9-]*(/[A-Za-z0-9][A-Za-z0-9._-]*){0,2}")
_ACCELERATOR = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# Slurm time formats SkyPilot passes to `sbatch --time`: [D-]HH:MM:SS or MM.
_TIME = re.compile(r"(?:(?P<days>\d+)-)?(?P<h>\d{1,3}):(?P<m>[0-5]\d):(?P<s>[0-5]\d)")
# Only these are expanded in remote_artifact_root (on the remote side, once).
_REMOTE_VARIABLES = re.compile(r"\$(?:\{(USER|HOME)\}|(USER|HOME))(?![A-Za-z0-9_])")


class IncompatibleProfile(UsageError):
    """The profile cannot serve the portable request; the message names both values."""


class PortableResources(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`[resources]` of an experiment: what it needs, in terms any cluster can be asked for.
    Recorded with a SkyPilot request, so a record of the package, not a configuration model
    (`profiles.parse_resources` decodes a table into it)."""

    #: nodes per evaluation
    nodes: Annotated[int, Meta(ge=1)] = 1
    #: accelerators on each node; None takes the profile's, 0 asks for none
    accelerators_per_node: Annotated[int, Meta(ge=0)] | None = None
    #: software stack the evaluation is built for (e.g. cuda, rocm); None: any
    accelerator_backend: str | None = None

    def __post_init__(self) -> None:
        backend = self.accelerator_backend
        if backend is not None and not _BACKEND.fullmatch(backend):
            raise ValueError(
                f"accelerator_backend: {backend!r}: use lower-case letters, digits, _ and -"
            )


class SkyPilotProfile(BaseModel):
    """`[profiles.NAME]` with `runner = "skypilot"`: how this operator runs evaluations."""

    model_config = _STRICT

    runner: Literal["skypilot"] = Field(description="Selects the SkyPilot adapter.")
    infra: str = Field(description="SkyPilot infra, e.g. slurm/<ssh host alias>/<partition>.")
    accelerator_backend: str | None = Field(
        default=None, description="The stack this cluster's accelerators run (e.g. rocm)."
    )
    accelerator_type: str | None = Field(
        default=None, description="SkyPilot accelerator name, as the cluster reports it."
    )
    accelerators_per_node: int | None = Field(
        default=None, ge=0, description="Accelerators per node: the most a request may ask."
    )
    cpus_per_node: int | None = Field(default=None, ge=1, description="CPUs per node.")
    exclusive: bool = Field(default=False, description="Whole nodes (sbatch --exclusive).")
    command_prefix: StrTuple = Field(
        default=(),
        description="argv put before every evaluation command (e.g. a container entry point).",
    )
    allocation_time: str = Field(
        description="Wall time of the allocation that holds the cluster ([D-]HH:MM:SS)."
    )
    remote_artifact_root: str = Field(
        description="Absolute path on the cluster's shared file system for the remote attempt "
        "directories; $USER and $HOME are expanded there."
    )

    @field_validator("infra")
    @classmethod
    def _infra(cls, value: str) -> str:
        if not _INFRA.fullmatch(value):
            raise ValueError(f"{value!r} is not an infra such as slurm/<alias>/<partition>")
        return value

    @field_validator("accelerator_backend")
    @classmethod
    def _backend(cls, value: str | None) -> str | None:
        if value is not None and not _BACKEND.fullmatch(value):
            raise ValueError(f"{value!r}: use lower-case letters, digits, _ and -")
        return value

    @field_validator("accelerator_type")
    @classmethod
    def _accelerator(cls, value: str | None) -> str | None:
        if value is not None and not _ACCELERATOR.fullmatch(value):
            raise ValueError(f"{value!r}: use letters, digits, . _ -")
        return value

    @field_validator("command_prefix")
    @classmethod
    def _prefix(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not word or "\0" in word or "\n" in word for word in value):
            raise ValueError("every word must be non-empty and hold no NUL or newline")
        return value

    @field_validator("allocation_time")
    @classmethod
    def _time(cls, value: str) -> str:
        found = _TIME.fullmatch(value)
        if found is None:
            raise ValueError(f"{value!r}: write [D-]HH:MM:SS, e.g. 08:00:00")
        if allocation_seconds(value) < 60:
            raise ValueError(f"{value!r}: at least one minute")
        return value

    @field_validator("remote_artifact_root")
    @classmethod
    def _root(cls, value: str) -> str:
        # Checked as it will be once expanded ($HOME is absolute, $USER one plain word).
        plain = expand_remote_root(value, "user", "/home/user")
        if "$" in plain or "`" in value:
            raise ValueError(f"{value!r}: only $USER and $HOME may be expanded")
        if not plain.startswith("/") or plain == "/" or posixpath.normpath(value) != value:
            raise ValueError(f"{value!r}: must be a normalized absolute path other than /")
        if any(ch.isspace() or ch in "'\"\\" for ch in value):
            raise ValueError(f"{value!r}: no whitespace, quotes or backslashes")
        return value


def allocation_seconds(text: str) -> int:
    """Seconds in a validated `[D-]HH:MM:SS`."""
    found = _TIME.fullmatch(text)
    if found is None:
        raise ValueError(text)
    days = int(found["days"] or 0)
    return ((days * 24 + int(found["h"])) * 60 + int(found["m"])) * 60 + int(found["s"])


def expand_remote_root(root: str, user: str, home: str) -> str:
    """`remote_artifact_root` with $USER/$HOME replaced by the remote account's values."""

    def value(match: re.Match[str]) -> str:
        return user if (match[1] or match[2]) == "USER" else home

    return posixpath.normpath(_REMOTE_VARIABLES.sub(value, root))


class ClustersFile(BaseModel):
    """`clusters.toml`: named profiles, each for one runner."""

    model_config = _STRICT

    profiles: dict[str, SkyPilotProfile] = Field(
        default_factory=dict, description="Profiles by name ([profiles.NAME])."
    )

    @field_validator("profiles")
    @classmethod
    def _names(cls, value: dict[str, SkyPilotProfile]) -> dict[str, SkyPilotProfile]:
        for name in value:
            if not _PROFILE_NAME.fullmatch(name):
                raise ValueError(f"profile name {name!r}: use letters, digits, . _ -")
        return value


class EffectiveResources(BaseModel):
    """What is launched: the request as the profile fills and constrains it."""

    model_config = _STRICT

    profile: str
    infra: str
    nodes: int
    accelerators_per_node: int
    accelerator_type: str | None
    accelerator_backend: str | None
    cpus_per_node: int | None
    exclusive: bool
    allocation_time: str
    command_prefix: StrTuple
    remote_artifact_root: str

    def launch_shape(self) -> dict[str, object]:
        """The fields that decide whether an existing allocation can serve: the fingerprint's
        input. The profile's name, wall time, prefix and paths are not among them."""
        return {
            "infra": self.infra,
            "nodes": self.nodes,
            "accelerators_per_node": self.accelerators_per_node,
            "accelerator_type": self.accelerator_type,
            "cpus_per_node": self.cpus_per_node,
            "exclusive": self.exclusive,
        }


def resolve_resources(
    request: PortableResources, profile: SkyPilotProfile, profile_name: str
) -> EffectiveResources:
    """Fill `request` from `profile` and check that the profile can serve it. Raises
    IncompatibleProfile naming the key of each side."""

    def refuse(detail: str) -> IncompatibleProfile:
        return IncompatibleProfile(f"profile {profile_name!r} cannot serve [resources]: {detail}")

    wanted_backend = request.accelerator_backend
    if wanted_backend is not None and profile.accelerator_backend != wanted_backend:
        offered = profile.accelerator_backend or "none"
        raise refuse(f"accelerator_backend = {wanted_backend!r}, profile offers {offered!r}")
    limit = profile.accelerators_per_node
    wanted = request.accelerators_per_node
    if wanted is None:
        count = limit or 0
    elif limit is not None and wanted > limit:
        raise refuse(f"accelerators_per_node = {wanted}, profile allows at most {limit}")
    elif wanted > 0 and limit is None:
        raise refuse(f"accelerators_per_node = {wanted}, profile has no accelerators")
    else:
        count = wanted
    if count > 0 and profile.accelerator_type is None:
        raise refuse(f"{count} accelerators per node, but the profile sets no accelerator_type")
    return EffectiveResources(
        profile=profile_name,
        infra=profile.infra,
        nodes=request.nodes,
        accelerators_per_node=count,
        accelerator_type=profile.accelerator_type if count > 0 else None,
        accelerator_backend=profile.accelerator_backend if count > 0 else wanted_backend,
        cpus_per_node=profile.cpus_per_node,
        exclusive=profile.exclusive,
        allocation_time=profile.allocation_time,
        command_prefix=profile.command_prefix,
        remote_artifact_root=profile.remote_artifact_root,
    )
