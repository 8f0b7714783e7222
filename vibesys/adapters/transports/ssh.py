"""The `ssh` transport: Slurm commands run on a login node over one paramiko connection.

One `SSHClient` connection, opened at the first command, serves every command (one channel
each). The host key is verified against the configured known_hosts; an unknown host is refused
unless the operator opted in (`accept_unknown_host`), and a changed key is always refused. A jump
host, when configured, carries the connection through a `direct-tcpip` channel.

Commands run through one remote helper per connection (`_ssh_helper.py`, started by
`ssh_session.HelperSession`): OpenSSH runs every command through the user's shell, which on
Debian reads ~/.bashrc for it; the helper pays that once per connection and then starts each
command directly, argv as given, with no shell (or through `shell_command` when the site sets
one), in a few milliseconds. With `login_shell` the helper itself is started by `bash -l`, so
profile scripts (`module load slurm`) set its environment once. A remote side without python3
gets the old way: one channel per command, its argv quoted with `shell_join` (behind
`shell_command` when set) for the user's shell, so no argument is ever re-split or expanded.
Only allowlisted local environment variables travel: in the helper's request, or as an
`env NAME=VALUE ...` prefix on the old way.

Failures are mapped at this edge (`map_ssh_errors`): a connection lost during a command is
`TransportLost` carrying `maybe_submitted=maybe_effect` (an sbatch whose answer was lost must be
looked up by its job name, never re-run blindly); a timeout is `BackendUnavailable` with the
same flag; authentication and host-key problems are `BackendUnavailable` that waiting will not
fix (`retryable=False`). After a lost connection the next command reconnects with bounded
exponential backoff; the transport never re-runs a command itself.

Secrets never leave: the passphrase, the identity file's contents and the values of allowlisted
variables whose names look secret are removed from every message, evidence and stderr
(`redact`; stdout is data and stays raw), and mapped errors do not chain paramiko's own
exception (whose text could hold them). Through the helper, allowlisted values travel in the
channel, never on a command line; on the old way they are on the command line, so the remote
host's `ps` may show them while the login shell starts.

On a timeout the helper sends the command's session SIGTERM, then SIGKILL two seconds later,
and reports it; a helper that stops answering is dropped with its channel. On the old way the
command is asked to stop (an RFC 4254 "signal" request, TERM) and its channel is closed;
OpenSSH honours that request for ordinary users only, so a command that never writes may
outlive its channel. Either way the caller's `maybe_submitted` handling covers the case.

One class per concern, each built once and handed in: `ssh_settings.SshSettings` (what the
site's table says), `ssh_connect.SshConnection` (login, host keys, jump host, keepalive,
reconnecting), `ssh_pool.HelperPool` (the remote helpers, own or from this host's shared
connection) and `SshTransport` here (commands and streams), which holds the other two.
`ssh_errors` maps errors and redacts; `ssh_channel` runs one command on a channel of its own.
This module re-exports their public names.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from vibesys.adapters.transports.base import CommandResult, Sink, check_argv
from vibesys.adapters.transports.ssh_channel import READ_SIZE, ChannelSettings, run_on_channel
from vibesys.adapters.transports.ssh_connect import MAX_BACKOFF_SECONDS, SshConnection
from vibesys.adapters.transports.ssh_errors import (
    REDACTED,
    host_key_fingerprint,
    is_secret_name,
    map_ssh_errors,
    redact,
)
from vibesys.adapters.transports.ssh_pool import HelperPool
from vibesys.adapters.transports.ssh_settings import (
    MAX_PACKET_SIZE,
    PREFERRED_CIPHERS,
    WINDOW_SIZE,
    SshSettings,
    command_line,
    helper_argv,
    helper_launch,
)
from vibesys.adapters.transports.ssh_share import share_path
from vibesys.config.slurm import SshTransportConfig
from vibesys.errors import ConfigError

__all__ = [
    "MAX_BACKOFF_SECONDS",
    "MAX_PACKET_SIZE",
    "PREFERRED_CIPHERS",
    "READ_SIZE",
    "REDACTED",
    "STREAM_STDERR_LIMIT",
    "WINDOW_SIZE",
    "SshSettings",
    "SshTransport",
    "host_key_fingerprint",
    "is_secret_name",
    "map_ssh_errors",
    "redact",
]

#: stderr kept by `stream` (its stdout goes to the sink; a runaway stderr must not fill memory).
STREAM_STDERR_LIMIT = 1 << 20


class SshTransport:
    """Runs argv on a remote host over SSH; see the module docstring.

    Thread-safe: commands from several threads share the connection (one channel each).
    `close()` drops the connection and the idle helpers; the next command opens a new one.
    `env` (default: this process's environment) supplies the allowlisted variables.
    """

    def __init__(
        self, connection: SshConnection, pool: HelperPool, *, env: Mapping[str, str] | None = None
    ) -> None:
        self.settings = connection.settings
        self.connection = connection
        self.pool = pool
        self._env = env

    @classmethod
    def from_settings(
        cls,
        settings: SshSettings,
        *,
        passphrase: str | None = None,
        env: Mapping[str, str] | None = None,
        share: tuple[Path, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> SshTransport:
        """A transport, its connection and its helper pool, for `settings`."""
        connection = SshConnection(settings, passphrase=passphrase, sleep=sleep)
        pool = HelperPool(connection, launch=helper_launch(settings), share=share)
        return cls(connection, pool, env=env)

    @classmethod
    def from_config(
        cls,
        config: SshTransportConfig,
        *,
        env: Mapping[str, str] | None = None,
        share: bool = True,
    ) -> SshTransport:
        """The transport a validated `[slurm.transport] kind = "ssh"` table describes. `env`
        (default: this process's environment) supplies the passphrase variable and the
        allowlisted variables. With `share` and the table's `persist_seconds`, commands go
        through this host's shared connection for the site while there is one."""
        source = os.environ if env is None else env
        passphrase = None
        if config.passphrase_env is not None:
            passphrase = source.get(config.passphrase_env)
            if passphrase is None:
                raise ConfigError(
                    f"slurm.transport.passphrase_env: ${config.passphrase_env} is not set"
                )
        shared = None
        if share and config.persist_seconds > 0:
            # Defaults left out: a file and the rendering recorded from it (every default
            # written) mean the same settings and share one connection.
            config_json = config.model_dump_json(exclude_defaults=True)
            path = share_path(config_json)
            if path is not None:
                shared = (path, config_json)
        return cls.from_settings(
            SshSettings.from_config(config), passphrase=passphrase, env=env, share=shared
        )

    # -- what a caller may look at ------------------------------------------------------------

    @property
    def label(self) -> str:
        """`user@host:port`, as messages name the remote side."""
        return self.settings.label

    def secrets(self) -> frozenset[str]:
        """The values `redact` removes from everything this transport reports: the
        connection's secrets and the allowlisted variables whose names look secret."""
        found = set(self.connection.secrets())
        environment = self._environment()
        for name in self.settings.env_allowlist:
            value = environment.get(name)
            if value and is_secret_name(name):
                found.add(value)
        return frozenset(found)

    def command_line(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
        """The command string sent to the remote user's shell for `argv` when commands run one
        channel each (no helper); allowlisted variables come from `env` when given (a job's
        recorded environment), else from this process."""
        return command_line(self.settings, argv, self._allowed(env))

    def connect(self) -> None:
        """Open the connection now (commands open it on demand anyway)."""
        self.connection.connect()

    def warm(self) -> None:
        """Get a helper ready now (see `configured.prewarm`); errors are left to the first
        command."""
        self.pool.warm()

    def close(self) -> None:
        self.pool.close()
        self.connection.close()

    # -- Runner -------------------------------------------------------------------------------

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = None,
        maybe_effect: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        wanted = check_argv(argv)
        out = bytearray()
        returncode, stderr = self._execute(
            wanted, out.extend, input=input, timeout=timeout, maybe_effect=maybe_effect, env=env
        )
        return CommandResult(returncode, out.decode("utf-8", "replace"), stderr, wanted)

    def stream(
        self, argv: Sequence[str], sink: Sink, *, timeout: float | None = None
    ) -> CommandResult:
        wanted = check_argv(argv)
        returncode, stderr = self._execute(
            wanted,
            sink.write,
            input=None,
            timeout=timeout,
            maybe_effect=False,
            stderr_limit=STREAM_STDERR_LIMIT,
        )
        return CommandResult(returncode, "", stderr, wanted)

    def __enter__(self) -> SshTransport:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- one command --------------------------------------------------------------------------

    def _execute(
        self,
        argv: tuple[str, ...],
        write: Callable[[bytes], object],
        *,
        input: bytes | None,
        timeout: float | None,
        maybe_effect: bool,
        stderr_limit: int | None = None,
        env: Mapping[str, str] | None = None,
    ) -> tuple[int, str]:
        secrets = self.secrets()
        what = redact(shlex.join(argv), secrets)
        pool = self.pool
        pool.await_warming()
        helper = pool.shared_helper()
        if helper is None:
            transport = self.connection.ensure_connected()
            helper = pool.take_helper(transport, what, secrets)
        if helper is not None:
            return pool.run_through(
                helper,
                helper_argv(self.settings, argv),
                write,
                what=what,
                secrets=secrets,
                input=input,
                timeout=timeout,
                maybe_effect=maybe_effect,
                stderr_limit=stderr_limit,
                env=self._allowed(env) or None,
            )
        settings = self.settings
        return run_on_channel(
            transport,
            self.command_line(argv, env),
            write,
            ChannelSettings(
                settings.window_size, settings.max_packet_size, settings.connect_timeout
            ),
            input=input,
            timeout=timeout,
            maybe_effect=maybe_effect,
            stderr_limit=stderr_limit,
            read_size=settings.read_size,
            what=what,
            host=settings.label,
            secrets=secrets,
        )

    def _environment(self) -> Mapping[str, str]:
        return os.environ if self._env is None else self._env

    def _allowed(self, env: Mapping[str, str] | None) -> dict[str, str]:
        environment = self._environment() if env is None else env
        return {
            name: environment[name] for name in self.settings.env_allowlist if name in environment
        }
