"""What the `ssh` transport is set to do, in one record built once (from a site's
`[slurm.transport]` table, or by a test), and the command lines those settings make.

The connection (`ssh_connect`), the helper pool (`ssh_pool`) and the transport (`ssh`) all read
this one record; none keeps copies of its fields. The passphrase is not a setting: it is a
secret read from the environment, handed to the connection alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from msgspec import Struct

from vibesys.adapters.transports.base import shell_join
from vibesys.adapters.transports.ssh_channel import READ_SIZE
from vibesys.adapters.transports.ssh_session import PYTHONS, helper_source, launch_command
from vibesys.config.slurm import SshTransportConfig
from vibesys.errors import ConfigError

__all__ = [
    "HELPER_SHELL",
    "LOGIN_SHELL",
    "MAX_PACKET_SIZE",
    "PREFERRED_CIPHERS",
    "WINDOW_SIZE",
    "SshSettings",
    "command_line",
    "helper_argv",
    "helper_launch",
]

#: Ciphers put first in our offer, fastest first. paramiko decrypts AES-GCM with one call per
#: packet and no separate HMAC pass; benchmarks/bench_ssh_spool.py measures the difference.
PREFERRED_CIPHERS: tuple[str, ...] = (
    "aes128-gcm@openssh.com",
    "aes128-ctr",
    "aes256-gcm@openssh.com",
    "aes256-ctr",
)
#: Receive window of each channel: how much output may be in flight (and buffered here) before
#: the server waits for us. It bounds the memory of a stream; 8 MiB keeps loopback busy.
WINDOW_SIZE = 8 << 20
#: Largest data packet we accept. Fewer, bigger packets cost paramiko less Python per byte.
MAX_PACKET_SIZE = 256 << 10
#: How the helper is started by the remote user's shell: a plain POSIX shell, or a login
#: shell when the site's environment comes from profile scripts (`login_shell`).
HELPER_SHELL: tuple[str, ...] = ("sh", "-c")
LOGIN_SHELL: tuple[str, ...] = ("bash", "-lc")


class SshSettings(Struct, frozen=True, kw_only=True):
    """Where to log in and how, and how commands start there."""

    host: str
    port: int = 22
    user: str | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    accept_unknown_host: bool = False
    jump_host: str | None = None
    jump_port: int = 22
    jump_user: str | None = None
    connect_timeout: float = 10.0
    keepalive: float = 30.0
    reconnect_attempts: int = 3
    reconnect_backoff: float = 1.0
    #: local variables whose values travel with each command
    env_allowlist: tuple[str, ...] = ()
    #: no shell per command by default: the helper starts each argv directly
    shell_command: tuple[str, ...] = ()
    login_shell: bool = False
    use_helper: bool = True
    helper_pythons: tuple[str, ...] = PYTHONS
    ciphers: tuple[str, ...] = PREFERRED_CIPHERS
    window_size: int = WINDOW_SIZE
    max_packet_size: int = MAX_PACKET_SIZE
    read_size: int = READ_SIZE

    def __post_init__(self) -> None:
        if self.reconnect_attempts < 1:
            raise ConfigError("reconnect_attempts must be at least 1")
        if isinstance(self.shell_command, str):
            raise ConfigError("shell_command must be a list of arguments")
        if self.shell_command and "=" in self.shell_command[0]:
            raise ConfigError(f"shell_command: {self.shell_command[0]!r} may not contain '='")

    @classmethod
    def from_config(cls, config: SshTransportConfig) -> SshSettings:
        """The settings a validated `[slurm.transport] kind = "ssh"` table describes."""
        return cls(
            host=config.host,
            port=config.port,
            user=config.user,
            identity_file=config.identity_file,
            known_hosts=config.known_hosts,
            accept_unknown_host=config.accept_unknown_host,
            jump_host=config.jump_host,
            jump_port=config.jump_port,
            jump_user=config.jump_user,
            connect_timeout=config.connect_timeout_seconds,
            keepalive=config.keepalive_seconds,
            reconnect_attempts=config.reconnect_attempts,
            reconnect_backoff=config.reconnect_backoff_seconds,
            env_allowlist=tuple(config.env_allowlist),
            shell_command=tuple(config.shell_command),
            login_shell=config.login_shell,
        )

    @property
    def label(self) -> str:
        """`user@host:port`, as messages name the remote side."""
        who = f"{self.user}@" if self.user else ""
        via = f" via {self.jump_host}:{self.jump_port}" if self.jump_host else ""
        return f"{who}{self.host}:{self.port}{via}"

    @property
    def known_hosts_label(self) -> str:
        return self.known_hosts or "~/.ssh/known_hosts"


def command_line(
    settings: SshSettings, argv: Sequence[str], allowed: Mapping[str, str] | None = None
) -> str:
    """The command string sent to the remote user's shell for `argv` when commands run one
    channel each (no helper), with the `allowed` variables set for it."""
    assignments = [f"{name}={value}" for name, value in (allowed or {}).items()]
    prefix = ["env", *assignments] if assignments else []
    if settings.shell_command:
        line = shell_join([*prefix, *settings.shell_command, shell_join(argv)])
    else:
        line = shell_join([*prefix, *argv])
    return shell_join([*LOGIN_SHELL, line]) if settings.login_shell else line


def helper_argv(settings: SshSettings, argv: Sequence[str]) -> list[str]:
    """What the helper starts for `argv`: argv itself, or the site's shell running it."""
    if settings.shell_command:
        return [*settings.shell_command, shell_join(argv)]
    return list(argv)


def helper_launch(settings: SshSettings) -> str:
    """The command string that starts the helper (through the remote user's shell)."""
    shell = LOGIN_SHELL if settings.login_shell else HELPER_SHELL
    return shell_join(launch_command(shell, len(helper_source()), settings.helper_pythons))
