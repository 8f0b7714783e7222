"""Configuration: strict, frozen pydantic models parsed once at the CLI edge.

Only typed objects travel inward from here. Imports pydantic and `vibesys.errors`, nothing else
of vibesys.
"""

from __future__ import annotations

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
from vibesys.config.resources import (
    ClustersFile,
    EffectiveResources,
    IncompatibleProfile,
    PortableResources,
    SkyPilotProfile,
    resolve_resources,
)
from vibesys.config.sizing import AskedSizing, CheckedSizing, check_sizing
from vibesys.config.slurm import AgentGpuConfig, SlurmConfig, SlurmSiteConfig, VibesysTable
from vibesys.config.transport import LocalTransportConfig, SshTransportConfig, TransportConfig

__all__ = [
    "DEFAULT_CLUSTERS_CONFIG",
    "DEFAULT_SLURM_CONFIG",
    "AgentGpuConfig",
    "AskedSizing",
    "CheckedSizing",
    "ClustersFile",
    "EffectiveResources",
    "IncompatibleProfile",
    "LocalTransportConfig",
    "PortableResources",
    "SkyPilotProfile",
    "SlurmConfig",
    "SlurmSiteConfig",
    "SshTransportConfig",
    "TransportConfig",
    "VibesysTable",
    "check_sizing",
    "default_slurm_config_path",
    "load_clusters_config",
    "load_slurm_config",
    "parse_clusters_config",
    "parse_resources",
    "parse_slurm_config",
    "resolve_resources",
    "select_profile",
]
