"""How commands reach Slurm: a `Runner` runs one argv there and returns its output.

`local` runs on this host; `ssh` runs on a login node over one paramiko connection
(`vibesys.adapters.transports.ssh`). `configured.runner_from_config` builds the one a site's
table describes; this package itself loads no SSH, so the local adapter, which uses its
helpers, never imports paramiko.
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

__all__ = [
    "DEFAULT_SHELL_COMMAND",
    "CommandResult",
    "LocalTransport",
    "Runner",
    "check_argv",
    "map_transport_errors",
    "shell_join",
]
