"""How commands reach Slurm: a `Runner` runs one argv there and returns its output.

`local` runs on this host; `ssh` runs on a login node over one paramiko connection
(`vibesys.adapters.transports.ssh`, imported only when an ssh transport is built, so commands
that never reach a cluster never import paramiko). Adapters receive a Runner and never build
one from strings themselves.
"""

from __future__ import annotations

from vibesys.adapters.transports.base import (
    CommandResult,
    Runner,
    check_argv,
    map_transport_errors,
    shell_join,
)
from vibesys.adapters.transports.local import DEFAULT_SHELL_COMMAND, LocalTransport
from vibesys.config.slurm import LocalTransportConfig, SshTransportConfig
from vibesys.errors import ConfigError

__all__ = [
    "DEFAULT_SHELL_COMMAND",
    "CommandResult",
    "LocalTransport",
    "Runner",
    "check_argv",
    "map_transport_errors",
    "runner_from_config",
    "shell_join",
]


def runner_from_config(config: LocalTransportConfig | SshTransportConfig) -> Runner:
    """The Runner a `[slurm.transport]` table describes."""
    if isinstance(config, LocalTransportConfig):
        return LocalTransport(config.shell_command)
    if isinstance(config, SshTransportConfig):
        from vibesys.adapters.transports.ssh import SshTransport  # paramiko: only when needed

        return SshTransport.from_config(config)
    raise ConfigError(f"slurm.transport.kind: {config.kind!r} is not implemented")
