"""How commands reach Slurm: a `Runner` runs one argv there and returns its output.

`local` runs on this host; `ssh` runs on a login node over one paramiko connection
(`vibesys.adapters.transports.ssh`, imported only when an ssh transport is built; paramiko
itself is imported only when the process logs in, which a process served by the host's shared
connection never does). Adapters receive a Runner and never build one from strings themselves.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from vibesys.adapters.transports.base import (
    CommandResult,
    Runner,
    check_argv,
    map_transport_errors,
    shell_join,
)
from vibesys.adapters.transports.local import DEFAULT_SHELL_COMMAND, LocalTransport
from vibesys.errors import ConfigError

if TYPE_CHECKING:
    # Only what a transport is made from: the local adapter uses this package's helpers,
    # and needs neither the site configuration's models nor pydantic.
    from vibesys.adapters.transports.ssh import SshTransport
    from vibesys.config.slurm import LocalTransportConfig, SshTransportConfig

__all__ = [
    "DEFAULT_SHELL_COMMAND",
    "CommandResult",
    "LocalTransport",
    "Runner",
    "check_argv",
    "map_transport_errors",
    "prewarm",
    "runner_from_config",
    "shell_join",
]


#: One SSH transport per configuration in a process: every adapter instance of a site shares
#: its connection (and its helper), and one warmed up early is the one commands use.
_SSH: dict[SshTransportConfig, SshTransport] = {}
_SSH_LOCK = threading.Lock()


def runner_from_config(config: LocalTransportConfig | SshTransportConfig) -> Runner:
    """The Runner a `[slurm.transport]` table describes."""
    from vibesys.config.slurm import LocalTransportConfig, SshTransportConfig

    if isinstance(config, LocalTransportConfig):
        return LocalTransport(config.shell_command)
    if isinstance(config, SshTransportConfig):
        from vibesys.adapters.transports.ssh import SshTransport  # paramiko: only when needed

        with _SSH_LOCK:
            if config not in _SSH:
                _SSH[config] = SshTransport.from_config(config)
            return _SSH[config]
    raise ConfigError(f"slurm.transport.kind: {config.kind!r} is not implemented")


def prewarm(config: LocalTransportConfig | SshTransportConfig) -> None:
    """Start opening the connection (and its remote helper) now, on a thread, so that its
    round trips overlap the work done before the first command. Nothing for a local transport.
    Failures are left to the first real command, which reports them."""
    from vibesys.config.slurm import SshTransportConfig

    if not isinstance(config, SshTransportConfig):
        return

    def warm() -> None:
        try:
            runner = runner_from_config(config)
            warm_up = getattr(runner, "warm", None)
            if callable(warm_up):
                warm_up()
        except Exception:  # the first real command meets it, and says it
            pass

    threading.Thread(target=warm, name="vibesys-ssh-prewarm", daemon=True).start()
