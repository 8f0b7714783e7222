"""The login node's transport, read from the same place SkyPilot reads it.

For a `slurm/<alias>[/<partition>]` infra SkyPilot logs in as `~/.slurm/config` says for Host
`<alias>` (OpenSSH format; `~` being SkyPilot's client HOME). vibesys reaches the remote attempt
directories through that same host with its own SSH transport (paramiko, host keys verified
against the entry's UserKnownHostsFile or ~/.ssh/known_hosts), so the operator configures the
login once. The fence, markers, logs and artifacts therefore never depend on `sky exec`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import paramiko

from vibesys.adapters.base import Sink
from vibesys.adapters.transports import Runner
from vibesys.adapters.transports.base import CommandResult
from vibesys.adapters.transports.configured import runner_from_config
from vibesys.config.slurm import SshTransportConfig
from vibesys.errors import BackendMisconfigured, ConfigError

__all__ = ["LazyLoginRunner", "login_runner", "login_transport_config", "slurm_alias"]


def slurm_alias(infra: str) -> str:
    parts = infra.split("/")
    if parts[0] != "slurm" or len(parts) < 2:
        raise ConfigError(
            f"infra {infra!r}: the remote attempt directories are reached through the login "
            "node of a slurm/<alias>[/<partition>] infra; name the alias"
        )
    return parts[1]


def login_transport_config(infra: str, sky_home: Path) -> SshTransportConfig:
    """An ssh transport for the login node SkyPilot uses for `infra`."""
    alias = slurm_alias(infra)
    path = sky_home / ".slurm" / "config"
    try:
        config = paramiko.SSHConfig.from_path(str(path))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file (SkyPilot's Slurm login configuration)") from None
    if alias not in config.get_hostnames():
        raise ConfigError(f"{path}: no Host {alias} (named by infra {infra!r})")
    entry = config.lookup(alias)
    identity = entry.get("identityfile")
    known_hosts = entry.get("userknownhostsfile")
    jump = entry.get("proxyjump")
    settings: dict[str, Any] = {
        "kind": "ssh",
        "host": entry.get("hostname", alias),
        "port": int(entry.get("port", 22)),
        "user": entry.get("user"),
        "identity_file": identity[0] if identity else None,
        "known_hosts": known_hosts.split()[0] if known_hosts else None,
    }
    if jump and jump.lower() != "none":
        settings.update(first_hop(jump, path))
    return SshTransportConfig(**settings)


def first_hop(jump: str, path: Path) -> dict[str, Any]:
    """The jump_* settings of ProxyJump's first hop, `[user@]host[:port]` (a bracketed IPv6
    address may carry a port, or an `ssh://` URI); later hops cannot be expressed and are
    refused rather than silently skipped."""
    hops = [hop.strip() for hop in jump.split(",")]
    if len(hops) > 1:
        raise ConfigError(f"{path}: ProxyJump {jump!r}: only one jump host is supported")
    hop = hops[0].removeprefix("ssh://")
    user, _, address = hop.rpartition("@")
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port = rest.removeprefix(":")
    elif address.count(":") == 1:
        host, _, port = address.partition(":")
    else:
        host, port = address, ""
    if not host or (port and not port.isdigit()):
        raise ConfigError(f"{path}: ProxyJump {jump!r} is not [user@]host[:port]")
    settings: dict[str, Any] = {"jump_host": host}
    if user:
        settings["jump_user"] = user
    if port:
        settings["jump_port"] = int(port)
    return settings


def login_runner(infra: str, sky_home: Path) -> Runner:
    return runner_from_config(login_transport_config(infra, sky_home))


class LazyLoginRunner:
    """The login node's runner, built on first use: commands that never reach the cluster
    (`vibesys logs` of a finished job, `journal show`) need no SSH configuration. A missing or
    wrong configuration is BackendMisconfigured, with the fix, when a command needs it."""

    def __init__(self, infra: str, sky_home: Path) -> None:
        self.infra = infra
        self.sky_home = sky_home
        self._runner: Runner | None = None

    def _get(self) -> Runner:
        if self._runner is None:
            try:
                self._runner = login_runner(self.infra, self.sky_home)
            except ConfigError as exc:
                raise BackendMisconfigured(
                    f"the login node of {self.infra}: {exc}",
                    fix=f"add the site's Host to {self.sky_home}/.slurm/config (SkyPilot's "
                    "login configuration), or set VIBESYS_SKY_LOGIN=local",
                ) from None
        return self._runner

    def identity_file(self) -> str | None:
        """The identity file SkyPilot logs in with (None: none named, or no readable entry):
        its certificate is named when the login node refuses a login."""
        try:
            return login_transport_config(self.infra, self.sky_home).identity_file
        except ConfigError:
            return None

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = None,
        maybe_effect: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        return self._get().run(
            argv, input=input, timeout=timeout, maybe_effect=maybe_effect, env=env
        )

    def stream(
        self, argv: Sequence[str], sink: Sink, *, timeout: float | None = None
    ) -> CommandResult:
        return self._get().stream(argv, sink, timeout=timeout)
