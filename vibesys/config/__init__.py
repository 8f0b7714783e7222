"""Configuration: strict, frozen pydantic models parsed once at the CLI edge.

Only typed objects travel inward from here. Imports pydantic and `vibesys.errors`, nothing else
of vibesys. The public names load on first use: a Slurm run needs the site configuration, not
the SkyPilot profiles and resource models (each `vibesys run` pays for what it imports).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_PUBLIC = {
    "AgentGpuConfig": "vibesys.config.slurm",
    "check_request": "vibesys.config.request",
    "CheckedRequest": "vibesys.config.request",
    "ClustersFile": "vibesys.config.resources",
    "DEFAULT_CLUSTERS_CONFIG": "vibesys.config.profiles",
    "DEFAULT_SLURM_CONFIG": "vibesys.config.load",
    "default_slurm_config_path": "vibesys.config.load",
    "EffectiveResources": "vibesys.config.resources",
    "IncompatibleProfile": "vibesys.config.resources",
    "load_clusters_config": "vibesys.config.profiles",
    "load_slurm_config": "vibesys.config.load",
    "LocalTransportConfig": "vibesys.config.transport",
    "parse_clusters_config": "vibesys.config.profiles",
    "parse_resources": "vibesys.config.profiles",
    "parse_slurm_config": "vibesys.config.load",
    "PortableResources": "vibesys.config.resources",
    "resolve_resources": "vibesys.config.resources",
    "select_profile": "vibesys.config.profiles",
    "SkyPilotProfile": "vibesys.config.resources",
    "SlurmConfig": "vibesys.config.slurm",
    "SlurmRequest": "vibesys.config.request",
    "SlurmSiteConfig": "vibesys.config.slurm",
    "SshTransportConfig": "vibesys.config.transport",
    "TransportConfig": "vibesys.config.transport",
    "VibesysTable": "vibesys.config.slurm",
}

if TYPE_CHECKING:
    from vibesys.config.load import (
        DEFAULT_SLURM_CONFIG,
        default_slurm_config_path,
        load_slurm_config,
        parse_slurm_config,
    )
    from vibesys.config.profiles import (
        DEFAULT_CLUSTERS_CONFIG,
        load_clusters_config,
        parse_clusters_config,
        parse_resources,
        select_profile,
    )
    from vibesys.config.request import CheckedRequest, SlurmRequest, check_request
    from vibesys.config.resources import (
        ClustersFile,
        EffectiveResources,
        IncompatibleProfile,
        PortableResources,
        SkyPilotProfile,
        resolve_resources,
    )
    from vibesys.config.slurm import AgentGpuConfig, SlurmConfig, SlurmSiteConfig, VibesysTable
    from vibesys.config.transport import LocalTransportConfig, SshTransportConfig, TransportConfig


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'vibesys.config' has no attribute {name!r}")


__all__ = [
    "DEFAULT_CLUSTERS_CONFIG",
    "DEFAULT_SLURM_CONFIG",
    "AgentGpuConfig",
    "CheckedRequest",
    "ClustersFile",
    "EffectiveResources",
    "IncompatibleProfile",
    "LocalTransportConfig",
    "PortableResources",
    "SkyPilotProfile",
    "SlurmConfig",
    "SlurmRequest",
    "SlurmSiteConfig",
    "SshTransportConfig",
    "TransportConfig",
    "VibesysTable",
    "check_request",
    "default_slurm_config_path",
    "load_clusters_config",
    "load_slurm_config",
    "parse_clusters_config",
    "parse_resources",
    "parse_slurm_config",
    "resolve_resources",
    "select_profile",
]
