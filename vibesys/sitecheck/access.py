"""How a check reaches a site: the site's own transport, logging in itself.

The check builds its own connection rather than borrowing this host's shared one (which would
skip the very login it must prove), with one connection attempt bounded by the check's time
limit: a frozen sshd is reported within that limit, not after the transport's reconnect
backoff. The `transport` row says what was proven: the host key verified against known_hosts,
the key accepted, a command run.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Sequence
from pathlib import Path

from vibesys.adapters.transports import LocalTransport, Runner
from vibesys.adapters.transports.base import CommandResult
from vibesys.adapters.transports.ssh import SshTransport
from vibesys.adapters.transports.ssh_errors import host_key_fingerprint
from vibesys.config.slurm import LocalTransportConfig, SshTransportConfig
from vibesys.errors import BackendMisconfigured, BackendUnavailable, ConfigError
from vibesys.sitecheck.runner import Found, fail, ok, warn

__all__ = ["SiteAccess"]


class SiteAccess:
    """The site's commands and files for one check run; `close()` drops its connection."""

    def __init__(
        self,
        config: LocalTransportConfig | SshTransportConfig,
        timeout: float,
        *,
        where: str,
        runner: Runner | None = None,
    ) -> None:
        self.config = config
        self.timeout = timeout
        #: names the configuration in a fix ("[slurm.transport] in slurm.toml")
        self.where = where
        #: the transport the configuration describes, built at first use (tests inject one)
        self._runner = runner

    @property
    def runner(self) -> Runner:
        if self._runner is None:
            self._runner = self._build()
        return self._runner

    def run(
        self, argv: Sequence[str], *, input: bytes | None = None, timeout: float | None = None
    ) -> CommandResult:
        return self.runner.run(argv, input=input, timeout=timeout or self.timeout)

    def close(self) -> None:
        close = getattr(self._runner, "close", None)
        if callable(close):
            close()

    # -- the transport row ----------------------------------------------------------------------

    def login(self) -> Found:
        """Reach the site and run one command there."""
        if isinstance(self.config, SshTransportConfig):
            return self._ssh_login(self.config)
        shell = shlex.join(self.config.shell_command)
        done = self.run(["true"])
        if done.returncode != 0:
            return fail(
                f"local: `{shell} true` exited {done.returncode}: {_tail(done.stderr)}",
                f"fix shell_command of {self.where}",
            )
        return ok(f"local: `{shell}` runs commands on this host")

    def _ssh_login(self, config: SshTransportConfig) -> Found:
        transport = self.runner
        assert isinstance(transport, SshTransport)
        label = transport.label
        started = time.monotonic()
        try:
            transport.connect()
        except BackendUnavailable as exc:
            if isinstance(exc, BackendMisconfigured):
                raise
            where = f"{config.host}:{config.port}"
            via = f" (through {config.jump_host}:{config.jump_port})" if config.jump_host else ""
            after = f" (gave up after {time.monotonic() - started:.1f} s)"
            raise BackendUnavailable(
                exc.evidence + after,  # with the connection's last error
                evidence=exc.evidence + after,
                fix=f"check that sshd on {where}{via} runs, answers and is reachable from this "
                "host (a stopped or frozen sshd, a firewall, the VPN, the jump host)",
            ) from None
        key = transport.connection.paramiko_transport.get_remote_server_key()
        fingerprint = f"{key.get_name()} {host_key_fingerprint(key)}"
        known = config.known_hosts or "~/.ssh/known_hosts"
        done = self.run(["true"])
        if done.returncode != 0:
            return fail(
                f"ssh {label}: logged in, but `true` exited {done.returncode}: "
                f"{_tail(done.stderr)}",
                f"fix the remote account's shell, or shell_command of {self.where}",
            )
        identity = f"key {config.identity_file}" if config.identity_file else "the default keys"
        facts = f"ssh {label}: {identity} accepted"
        helper = "; commands start through the remote helper (python3)"
        if transport.pool.helpers_started == 0 and transport.settings.use_helper:
            return warn(
                f"{facts}; host key {fingerprint}; no python3 on the login node: each command "
                "starts a shell of its own, and declared artifacts cannot be listed",
                "install python3 (3.6 or newer) on the login node",
            )
        if transport.connection.accepted_unknown_hosts:
            return warn(
                f"{facts}; host key {fingerprint} is NOT in {known}: trusted only because "
                f"accept_unknown_host = true{helper}",
                f"verify {host_key_fingerprint(key)} with the host's owner, add it to {known}, "
                f"and set accept_unknown_host = false in {self.where}",
            )
        return ok(f"{facts}; host key {fingerprint} verified against {known}{helper}")

    def _build(self) -> Runner:
        config = self.config
        if isinstance(config, LocalTransportConfig):
            return LocalTransport(config.shell_command)
        bounded = config.model_copy(
            update={
                "connect_timeout_seconds": min(config.connect_timeout_seconds, self.timeout),
                "reconnect_attempts": 1,
            }
        )
        try:
            return SshTransport.from_config(bounded, share=False)
        except ConfigError as exc:
            raise BackendMisconfigured(
                str(exc), fix=f"set the variable {self.where} names, or fix that table"
            ) from None


def identity_path(config: LocalTransportConfig | SshTransportConfig) -> Path | None:
    if isinstance(config, SshTransportConfig) and config.identity_file:
        return Path(config.identity_file).expanduser()
    return None


def _tail(text: str) -> str:
    return " ".join(text.split())[-300:] or "(no output)"
