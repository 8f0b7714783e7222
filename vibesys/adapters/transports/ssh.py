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

The pieces live in sibling modules: `ssh_errors` (error mapping, redaction), `ssh_connect`
(the connection, host keys, jump host, reconnecting) and `ssh_channel` (one command's channel).
This module keeps `SshTransport` and re-exports their public names.
"""

from __future__ import annotations

import os
import shlex
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from vibesys.adapters.transports.base import (
    CommandResult,
    Sink,
    check_argv,
    shell_join,
)
from vibesys.adapters.transports.ssh_channel import (
    READ_SIZE,
    ChannelSettings,
    run_on_channel,
)
from vibesys.adapters.transports.ssh_connect import (
    MAX_BACKOFF_SECONDS,
    MAX_PACKET_SIZE,
    PREFERRED_CIPHERS,
    WINDOW_SIZE,
)
from vibesys.adapters.transports.ssh_errors import (
    REDACTED,
    host_key_fingerprint,
    is_secret_name,
    map_ssh_errors,
    redact,
)
from vibesys.adapters.transports.ssh_pool import HelperPool
from vibesys.adapters.transports.ssh_session import (
    PYTHONS,
    HelperSession,
    helper_source,
    launch_command,
)
from vibesys.adapters.transports.ssh_share import share_path
from vibesys.errors import ConfigError

if TYPE_CHECKING:
    from vibesys.config.slurm import SshTransportConfig

__all__ = [
    "DEFAULT_SHELL_COMMAND",
    "MAX_BACKOFF_SECONDS",
    "MAX_PACKET_SIZE",
    "PREFERRED_CIPHERS",
    "READ_SIZE",
    "REDACTED",
    "STREAM_STDERR_LIMIT",
    "WINDOW_SIZE",
    "SshTransport",
    "host_key_fingerprint",
    "is_secret_name",
    "map_ssh_errors",
    "redact",
]

#: No shell per command: the helper starts each argv directly (a site may set one).
DEFAULT_SHELL_COMMAND: tuple[str, ...] = ()
#: How the helper is started by the remote user's shell: a plain POSIX shell, or a login
#: shell when the site's environment comes from profile scripts (`login_shell`).
HELPER_SHELL: tuple[str, ...] = ("sh", "-c")
LOGIN_SHELL: tuple[str, ...] = ("bash", "-lc")
#: stderr kept by `stream` (its stdout goes to the sink; a runaway stderr must not fill memory).
STREAM_STDERR_LIMIT = 1 << 20


class SshTransport(HelperPool):
    """Runs argv on a remote host over SSH; see the module docstring.

    Thread-safe: commands from several threads share the connection (one channel each).
    `close()` drops the connection; the next command opens a new one.
    """

    def __init__(
        self,
        host: str,
        *,
        port: int = 22,
        user: str | None = None,
        identity_file: str | None = None,
        passphrase: str | None = None,
        known_hosts: str | None = None,
        accept_unknown_host: bool = False,
        jump_host: str | None = None,
        jump_port: int = 22,
        jump_user: str | None = None,
        connect_timeout: float = 10.0,
        keepalive: float = 30.0,
        reconnect_attempts: int = 3,
        reconnect_backoff: float = 1.0,
        env_allowlist: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        shell_command: Sequence[str] = DEFAULT_SHELL_COMMAND,
        login_shell: bool = False,
        use_helper: bool = True,
        helper_pythons: Sequence[str] = PYTHONS,
        ciphers: Sequence[str] = PREFERRED_CIPHERS,
        window_size: int = WINDOW_SIZE,
        max_packet_size: int = MAX_PACKET_SIZE,
        read_size: int = READ_SIZE,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if isinstance(shell_command, str):
            raise ConfigError("shell_command must be a list of arguments")
        if shell_command and "=" in shell_command[0]:
            raise ConfigError(f"shell_command: {shell_command[0]!r} may not contain '='")
        super().__init__(
            host,
            port=port,
            user=user,
            identity_file=identity_file,
            passphrase=passphrase,
            known_hosts=known_hosts,
            accept_unknown_host=accept_unknown_host,
            jump_host=jump_host,
            jump_port=jump_port,
            jump_user=jump_user,
            connect_timeout=connect_timeout,
            keepalive=keepalive,
            reconnect_attempts=reconnect_attempts,
            reconnect_backoff=reconnect_backoff,
            ciphers=ciphers,
            window_size=window_size,
            max_packet_size=max_packet_size,
            sleep=sleep,
        )
        self.env_allowlist = tuple(env_allowlist)
        self.shell_command = tuple(shell_command)
        self.login_shell = login_shell
        self.use_helper = use_helper
        self.helper_pythons = tuple(helper_pythons)
        self.read_size = read_size
        self._env = env
        self._pool_lock = threading.Lock()
        #: helpers waiting for a command, of the current connection
        self._idle: list[HelperSession] = []
        #: the connection on which the helper could not start (then: a channel per command)
        self._no_helper: int | None = None
        #: helpers started so far (for tests and benchmarks)
        self.helpers_started = 0
        #: set while `warm` starts a helper: a command waits for it rather than start another
        self._warming: threading.Event | None = None
        #: this host's shared connection for the site (`ssh_share`), set by `from_config`
        self.share: tuple[Path, str] | None = None
        self._shared_idle: list[HelperSession] = []
        self._share_due = False
        self._share_off = False

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
        transport = cls(
            config.host,
            port=config.port,
            user=config.user,
            identity_file=config.identity_file,
            passphrase=passphrase,
            known_hosts=config.known_hosts,
            accept_unknown_host=config.accept_unknown_host,
            jump_host=config.jump_host,
            jump_port=config.jump_port,
            jump_user=config.jump_user,
            connect_timeout=config.connect_timeout_seconds,
            keepalive=config.keepalive_seconds,
            reconnect_attempts=config.reconnect_attempts,
            reconnect_backoff=config.reconnect_backoff_seconds,
            env_allowlist=config.env_allowlist,
            env=env,
            shell_command=config.shell_command,
            login_shell=config.login_shell,
        )
        if share and config.persist_seconds > 0:
            # Defaults left out: a file and the rendering recorded from it (every default
            # written) mean the same settings and share one connection.
            config_json = config.model_dump_json(exclude_defaults=True)
            path = share_path(config_json)
            if path is not None:
                transport.share = (path, config_json)
        return transport

    # -- what a caller may look at ------------------------------------------------------------

    def secrets(self) -> frozenset[str]:
        """The values `redact` removes from everything this transport reports: the
        connection's secrets and the allowlisted variables whose names look secret."""
        found = set(super().secrets())
        environment = self._environment()
        for name in self.env_allowlist:
            value = environment.get(name)
            if value and is_secret_name(name):
                found.add(value)
        return frozenset(found)

    def command_line(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
        """The command string sent to the remote user's shell for `argv` when commands run one
        channel each (no helper); allowlisted variables come from `env` when given (a job's
        recorded environment), else from this process."""
        assignments = [f"{name}={value}" for name, value in self._allowed(env).items()]
        prefix = ["env", *assignments] if assignments else []
        if self.shell_command:
            line = shell_join([*prefix, *self.shell_command, shell_join(argv)])
        else:
            line = shell_join([*prefix, *argv])
        return shell_join([*LOGIN_SHELL, line]) if self.login_shell else line

    def helper_argv(self, argv: Sequence[str]) -> list[str]:
        """What the helper starts for `argv`: argv itself, or the site's shell running it."""
        if self.shell_command:
            return [*self.shell_command, shell_join(argv)]
        return list(argv)

    def helper_launch(self) -> str:
        """The command string that starts the helper (through the remote user's shell)."""
        shell = LOGIN_SHELL if self.login_shell else HELPER_SHELL
        return shell_join(launch_command(shell, len(helper_source()), self.helper_pythons))

    def close(self) -> None:
        with self._pool_lock:
            idle, self._idle = self._idle, []
            idle += self._shared_idle
            self._shared_idle = []
        for helper in idle:
            helper.close()
        super().close()

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
        self._await_warming()
        helper = self._shared_helper()
        if helper is None:
            transport = self._ensure_connected()
            helper = self._take_helper(transport, what, secrets)
        if helper is not None:
            return self._through_helper(
                helper,
                argv,
                write,
                what=what,
                secrets=secrets,
                input=input,
                timeout=timeout,
                maybe_effect=maybe_effect,
                stderr_limit=stderr_limit,
                env=env,
            )
        return run_on_channel(
            transport,
            self.command_line(argv, env),
            write,
            ChannelSettings(self.window_size, self.max_packet_size, self.connect_timeout),
            input=input,
            timeout=timeout,
            maybe_effect=maybe_effect,
            stderr_limit=stderr_limit,
            read_size=self.read_size,
            what=what,
            host=self.label,
            secrets=secrets,
        )

    def _environment(self) -> Mapping[str, str]:
        return os.environ if self._env is None else self._env

    def _allowed(self, env: Mapping[str, str] | None) -> dict[str, str]:
        environment = self._environment() if env is None else env
        return {name: environment[name] for name in self.env_allowlist if name in environment}
