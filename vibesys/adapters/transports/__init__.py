"""How commands reach Slurm: a `Runner` runs one argv there and returns its output.

`local` runs on this host; `ssh` (its own issue) will run on a login node behind the same
interface. Adapters receive a Runner and never build one from strings themselves.
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
    raise ConfigError(f"slurm.transport.kind: {config.kind!r} is not implemented yet")
