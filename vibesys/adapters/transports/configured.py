"""The Runner a site's `[slurm.transport]` table describes: this host (`local`), or a login node
over SSH (`ssh`). Adapters receive a Runner and never build one from strings themselves."""

from __future__ import annotations

import threading

from vibesys.adapters.transports.base import Runner
from vibesys.adapters.transports.local import LocalTransport
from vibesys.adapters.transports.ssh import SshTransport
from vibesys.config.slurm import LocalTransportConfig, SshTransportConfig
from vibesys.errors import ConfigError

__all__ = ["prewarm", "runner_from_config"]

#: One SSH transport per configuration in a process: every adapter instance of a site shares
#: its connection (and its helper), and one warmed up early is the one commands use.
_SSH: dict[SshTransportConfig, SshTransport] = {}
_SSH_LOCK = threading.Lock()


def runner_from_config(config: LocalTransportConfig | SshTransportConfig) -> Runner:
    """The Runner a `[slurm.transport]` table describes."""
    if isinstance(config, LocalTransportConfig):
        return LocalTransport(config.shell_command)
    if isinstance(config, SshTransportConfig):
        with _SSH_LOCK:
            if config not in _SSH:
                _SSH[config] = SshTransport.from_config(config)
            return _SSH[config]
    raise ConfigError(f"slurm.transport.kind: {config.kind!r} is not implemented")


def prewarm(config: LocalTransportConfig | SshTransportConfig) -> None:
    """Start opening the connection (and its remote helper) now, on a thread, so that its
    round trips overlap the work done before the first command. Nothing for a local transport.
    Failures are left to the first real command, which reports them."""
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
