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
from vibesys.config.request import CheckedRequest, SlurmRequest, check_request
from vibesys.config.slurm import (
    AgentGpuConfig,
    LocalTransportConfig,
    SlurmConfig,
    SlurmSiteConfig,
    SshTransportConfig,
    TransportConfig,
    VibesysTable,
)

__all__ = [
    "DEFAULT_SLURM_CONFIG",
    "AgentGpuConfig",
    "CheckedRequest",
    "LocalTransportConfig",
    "SlurmConfig",
    "SlurmRequest",
    "SlurmSiteConfig",
    "SshTransportConfig",
    "TransportConfig",
    "VibesysTable",
    "check_request",
    "default_slurm_config_path",
    "load_slurm_config",
    "parse_slurm_config",
]
