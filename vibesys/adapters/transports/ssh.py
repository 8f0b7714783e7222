"""The `ssh` transport: Slurm commands run on a login node over one paramiko connection.

One `SSHClient` connection, opened at the first command, serves every command (one channel
each). The host key is verified against the configured known_hosts; an unknown host is refused
unless the operator opted in (`accept_unknown_host`), and a changed key is always refused. A jump
host, when configured, carries the connection through a `direct-tcpip` channel.

A command is an argv: it is quoted with `shell_join` and handed to `shell_command` (default
`bash -c`), which the remote login shell starts, so no argument is ever re-split or expanded.
Only allowlisted local environment variables travel, as an `env NAME=VALUE ...` prefix.

Failures are mapped at this edge (`map_ssh_errors`): a connection lost during a command is
`TransportLost` carrying `maybe_submitted=maybe_effect` (an sbatch whose answer was lost must be
looked up by its job name, never re-run blindly); a timeout is `BackendUnavailable` with the
same flag; authentication and host-key problems are `BackendUnavailable` that waiting will not
fix (`retryable=False`). After a lost connection the next command reconnects with bounded
exponential backoff; the transport never re-runs a command itself.

Secrets never leave: the passphrase, the identity file's contents and the values of allowlisted
variables whose names look secret are removed from every message, evidence and stderr
(`redact`; stdout is data and stays raw), and mapped errors do not chain paramiko's own
exception (whose text could hold them). Allowlisted values travel inside the command line, so
the remote host's `ps` may show them while the login shell starts: prefer secrets that the
remote side reads from its own files.

On a timeout the command is asked to stop (an RFC 4254 "signal" request, TERM) and its channel
is closed. OpenSSH honours that request for ordinary users only (for root logins it logs
"session signalling requires privilege separation"), so a command that never writes may outlive
its channel: the caller's `maybe_submitted` handling covers that case.
"""

from __future__ import annotations

import base64
import hashlib
import math
import os
import re
import select
import shlex
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import paramiko  # type: ignore[import-untyped]

from vibesys.adapters.transports.base import CommandResult, Sink, check_argv, shell_join
from vibesys.errors import BackendUnavailable, ConfigError, TransportLost

if TYPE_CHECKING:
    from vibesys.config.slurm import SshTransportConfig

__all__ = [
    "DEFAULT_SHELL_COMMAND",
    "MAX_PACKET_SIZE",
    "PREFERRED_CIPHERS",
    "READ_SIZE",
    "WINDOW_SIZE",
    "SshTransport",
    "host_key_fingerprint",
    "is_secret_name",
    "map_ssh_errors",
    "redact",
]

DEFAULT_SHELL_COMMAND: tuple[str, ...] = ("bash", "-c")

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
#: Bytes taken from the channel per read: big enough for few Python round trips, small enough
#: that the copies paramiko makes on each read stay small next to the window.
READ_SIZE = 1 << 20
#: stderr kept by `stream` (its stdout goes to the sink; a runaway stderr must not fill memory).
STREAM_STDERR_LIMIT = 1 << 20
#: Longest single wait between two connection attempts.
MAX_BACKOFF_SECONDS = 60.0
#: Longest sleep while waiting for a channel, so deadlines and closures are rechecked.
_POLL_SECONDS = 1.0

REDACTED = "[REDACTED]"
_SECRET_WORDS = r"token|secret|passw(?:or)?d|passphrase|credential|key"
_SECRET_NAME = re.compile(_SECRET_WORDS, re.IGNORECASE)
_SECRET_ASSIGNMENT = re.compile(
    r"(?P<name>[A-Za-z0-9_.-]*(?:" + _SECRET_WORDS + r")[A-Za-z0-9_.-]*)="
    r"(?P<value>'[^']*'|\"[^\"]*\"|[^\s'\"]+)",
    re.IGNORECASE,
)
_PRIVATE_KEY_BLOCK = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
    re.DOTALL,
)


def is_secret_name(name: str) -> bool:
    """Whether a variable called `name` likely holds a secret (TOKEN, SECRET, PASSWORD, KEY)."""
    return _SECRET_NAME.search(name) is not None


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` without the given secret values (also in their repr- and shell-quoted forms),
    private key blocks, or the values of `NAME=value` assignments whose names look secret."""
    out = _PRIVATE_KEY_BLOCK.sub("[REDACTED PRIVATE KEY]", text)
    forms: set[str] = set()
    for secret in secrets:
        if secret:
            forms.update((secret, repr(secret)[1:-1], shlex.quote(secret)))
    for form in sorted(forms, key=len, reverse=True):
        if form:
            out = out.replace(form, REDACTED)
    return _SECRET_ASSIGNMENT.sub(lambda m: f"{m['name']}={REDACTED}", out)


def host_key_fingerprint(key: Any) -> str:
    """`SHA256:...`, as `ssh-keygen -l` and ssh's own prompts print it."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


class _UnknownHostKey(Exception):
    """Raised by our host-key policy: the host is not in known_hosts and may not be trusted."""

    def __init__(self, hostname: str, key_type: str, fingerprint: str, known_hosts: str) -> None:
        super().__init__(f"{hostname} is not in {known_hosts}")
        self.hostname = hostname
        self.key_type = key_type
        self.fingerprint = fingerprint
        self.known_hosts = known_hosts


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _not_retryable(error: BackendUnavailable) -> BackendUnavailable:
    # Waiting does not fix a refused key or a host we may not trust: the operator must act.
    error.retryable = False
    return error


@contextmanager
def map_ssh_errors(
    what: str,
    *,
    host: str = "",
    maybe_effect: bool = False,
    secrets: Iterable[str] = (),
) -> Iterator[None]:
    """Translate paramiko's and the socket's failures during `what` into our error types.

    Authentication, host-key and key-file problems become BackendUnavailable with
    `retryable=False` and `maybe_submitted=False` (nothing ran). A refused channel is
    BackendUnavailable (the connection is fine). Anything else from the connection (socket
    timeout, EOF, SSHException, OSError) is TransportLost with `maybe_submitted=maybe_effect`.
    Messages and evidence are redacted of `secrets`, and paramiko's exception is not chained.
    """
    hidden = tuple(secrets)
    where = f"ssh {host}: " if host else "ssh: "

    def clean(text: str) -> str:
        return redact(text, hidden)

    try:
        yield
    except _UnknownHostKey as exc:
        message = (
            f"{what}: refusing to connect: the host key of {exc.hostname} ({exc.key_type} "
            f"{exc.fingerprint}) is not in {exc.known_hosts}; verify the fingerprint and add "
            "the key there, or set accept_unknown_host = true"
        )
        raise _not_retryable(
            BackendUnavailable(clean(message), evidence=clean(where + message))
        ) from None
    except paramiko.BadHostKeyException as exc:
        message = (
            f"{what}: refusing to connect: the host key of {exc.hostname} changed (got "
            f"{exc.key.get_name()} {host_key_fingerprint(exc.key)}, known_hosts has "
            f"{exc.expected_key.get_name()} {host_key_fingerprint(exc.expected_key)}); "
            "this may be an attack, or the host was reinstalled"
        )
        raise _not_retryable(
            BackendUnavailable(clean(message), evidence=clean(where + message))
        ) from None
    except paramiko.AuthenticationException as exc:
        message = f"{what}: authentication failed for {host or 'the host'}"
        raise _not_retryable(
            BackendUnavailable(
                clean(message), evidence=clean(f"{where}{message}: {_describe(exc)}")
            )
        ) from None
    except paramiko.ChannelException as exc:
        message = f"{what}: the server refused a new session ({exc.text or exc.code})"
        raise BackendUnavailable(
            clean(message), evidence=clean(where + message), maybe_submitted=False
        ) from None
    # socket.timeout is an OSError; NoValidConnectionsError too.
    except (EOFError, paramiko.SSHException, OSError) as exc:
        message = f"{what}: connection lost ({_describe(exc)})"
        raise TransportLost(
            clean(message), evidence=clean(where + message), maybe_submitted=maybe_effect
        ) from None


class _Deadline(Exception):
    """The command's time limit passed (internal: becomes BackendUnavailable)."""


class _HostKeyPolicy:
    """paramiko's missing-host-key hook: refuse, or (opted in) trust and remember in memory."""

    def __init__(self, owner: SshTransport) -> None:
        self._owner = owner

    def missing_host_key(self, client: Any, hostname: str, key: Any) -> None:
        fingerprint = host_key_fingerprint(key)
        if not self._owner.accept_unknown_host:
            raise _UnknownHostKey(
                hostname, key.get_name(), fingerprint, self._owner.known_hosts_label
            )
        # Remembered for this transport's later connections: a different key for the same
        # host is then a changed key (refused), not another unknown one.
        self._owner._accepted.append((hostname, key))
        client.get_host_keys().add(hostname, key.get_name(), key)


class SshTransport:
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
        ciphers: Sequence[str] = PREFERRED_CIPHERS,
        window_size: int = WINDOW_SIZE,
        max_packet_size: int = MAX_PACKET_SIZE,
        read_size: int = READ_SIZE,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if isinstance(shell_command, str) or not shell_command:
            raise ConfigError("shell_command must be a non-empty list of arguments")
        if "=" in shell_command[0]:
            raise ConfigError(f"shell_command: {shell_command[0]!r} may not contain '='")
        if reconnect_attempts < 1:
            raise ConfigError("reconnect_attempts must be at least 1")
        self.host = host
        self.port = port
        self.user = user
        self.identity_file = identity_file
        self.known_hosts = known_hosts
        self.accept_unknown_host = accept_unknown_host
        self.jump_host = jump_host
        self.jump_port = jump_port
        self.jump_user = jump_user
        self.connect_timeout = connect_timeout
        self.keepalive = keepalive
        self.reconnect_attempts = reconnect_attempts
        self.reconnect_backoff = reconnect_backoff
        self.env_allowlist = tuple(env_allowlist)
        self.shell_command = tuple(shell_command)
        self.ciphers = tuple(ciphers)
        self.window_size = window_size
        self.max_packet_size = max_packet_size
        self.read_size = read_size
        self._passphrase = passphrase
        self._env = env
        self._sleep = sleep
        self._lock = threading.Lock()
        self._client: Any = None
        self._jump: Any = None
        self._connections = 0
        self._accepted: list[tuple[str, Any]] = []
        self._key_secrets: frozenset[str] = frozenset()

    @classmethod
    def from_config(
        cls, config: SshTransportConfig, *, env: Mapping[str, str] | None = None
    ) -> SshTransport:
        """The transport a validated `[slurm.transport] kind = "ssh"` table describes. `env`
        (default: this process's environment) supplies the passphrase variable and the
        allowlisted variables."""
        source = os.environ if env is None else env
        passphrase = None
        if config.passphrase_env is not None:
            passphrase = source.get(config.passphrase_env)
            if passphrase is None:
                raise ConfigError(
                    f"slurm.transport.passphrase_env: ${config.passphrase_env} is not set"
                )
        return cls(
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
        )

    # -- what a caller may look at ------------------------------------------------------------

    @property
    def label(self) -> str:
        """`user@host:port`, as messages name the remote side."""
        who = f"{self.user}@" if self.user else ""
        via = f" via {self.jump_host}:{self.jump_port}" if self.jump_host else ""
        return f"{who}{self.host}:{self.port}{via}"

    @property
    def known_hosts_label(self) -> str:
        return self.known_hosts or "~/.ssh/known_hosts"

    @property
    def connections(self) -> int:
        """How many connections this transport has opened so far."""
        return self._connections

    @property
    def paramiko_transport(self) -> Any:
        """The current connection's `paramiko.Transport`, or None when not connected."""
        client = self._client
        return client.get_transport() if client is not None else None

    def secrets(self) -> frozenset[str]:
        """The values `redact` removes from everything this transport reports."""
        found = set(self._key_secrets)
        if self._passphrase:
            found.add(self._passphrase)
        environment = self._environment()
        for name in self.env_allowlist:
            value = environment.get(name)
            if value and is_secret_name(name):
                found.add(value)
        return frozenset(found)

    def command_line(self, argv: Sequence[str]) -> str:
        """The command string sent to the remote login shell for `argv`."""
        inner = shell_join(argv)
        environment = self._environment()
        assignments = [
            f"{name}={environment[name]}" for name in self.env_allowlist if name in environment
        ]
        prefix = ["env", *assignments] if assignments else []
        return shell_join([*prefix, *self.shell_command, inner])

    # -- Runner -------------------------------------------------------------------------------

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = None,
        maybe_effect: bool = False,
    ) -> CommandResult:
        wanted = check_argv(argv)
        out = bytearray()
        returncode, stderr = self._execute(
            wanted, out.extend, input=input, timeout=timeout, maybe_effect=maybe_effect
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

    def connect(self) -> None:
        """Open the connection now (commands open it on demand anyway)."""
        self._ensure_connected()

    def close(self) -> None:
        """Drop the connection (commands in flight on it end with TransportLost)."""
        with self._lock:
            self._drop()

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
    ) -> tuple[int, str]:
        secrets = self.secrets()
        what = redact(shlex.join(argv), secrets)
        command = self.command_line(argv)
        transport = self._ensure_connected()
        with map_ssh_errors(what, host=self.label, secrets=secrets):
            channel = transport.open_session(
                window_size=self.window_size,
                max_packet_size=self.max_packet_size,
                timeout=self.connect_timeout,
            )
        try:
            with map_ssh_errors(what, host=self.label, maybe_effect=maybe_effect, secrets=secrets):
                try:
                    channel.exec_command(command)
                except paramiko.SSHException:
                    if transport.is_active():
                        # The server refused the request: the command did not start.
                        raise paramiko.ChannelException(0, "exec request refused") from None
                    raise
            feeder = self._feed(channel, input)
            deadline = None if timeout is None else time.monotonic() + timeout
            try:
                stderr = self._pump(
                    channel, write, deadline, what, maybe_effect, secrets, stderr_limit
                )
            except _Deadline:
                _send_signal(channel, "TERM")
                assert timeout is not None
                message = f"{what}: no answer within {timeout:g} s"
                raise BackendUnavailable(
                    message,
                    evidence=f"ssh {self.label}: {message}",
                    maybe_submitted=maybe_effect,
                ) from None
            finally:
                if feeder is not None:
                    feeder.join(timeout=_POLL_SECONDS)
            status = channel.exit_status
            if status == -1 and not transport.is_active():
                # The channel closed because the connection did, before the exit status came.
                message = f"{what}: connection lost before the command's exit status arrived"
                raise TransportLost(
                    message, evidence=f"ssh {self.label}: {message}", maybe_submitted=maybe_effect
                )
        finally:
            channel.close()
        # -1: the command ended without an exit status (killed by a signal).
        return int(status), redact(stderr.decode("utf-8", "replace"), secrets)

    @staticmethod
    def _feed(channel: Any, data: bytes | None) -> threading.Thread | None:
        """Send `data` to the command's stdin then EOF, on a thread when there is data: the
        command may write more output than the window holds before it reads its input."""
        if not data:
            channel.shutdown_write()
            return None

        def send() -> None:
            try:
                channel.sendall(data)
                channel.shutdown_write()
            except (EOFError, OSError, paramiko.SSHException):
                pass  # the command stopped reading or the connection broke: _pump reports it

        feeder = threading.Thread(target=send, name="vibesys-ssh-stdin", daemon=True)
        feeder.start()
        return feeder

    def _pump(
        self,
        channel: Any,
        write: Callable[[bytes], object],
        deadline: float | None,
        what: str,
        maybe_effect: bool,
        secrets: frozenset[str],
        stderr_limit: int | None,
    ) -> bytes:
        """Copy stdout into `write` and collect stderr, both as they come (the two share the
        window: draining only one could stall the command), until EOF and the exit status."""
        errors = bytearray()
        dropped = 0
        wake = channel.fileno()  # readable while either stream has data, and once closed
        chunk = self.read_size
        while True:
            if deadline is not None and time.monotonic() >= deadline:
                raise _Deadline()  # checked on every round: endless output must time out too
            with map_ssh_errors(what, host=self.label, maybe_effect=maybe_effect, secrets=secrets):
                data = channel.recv(chunk) if channel.recv_ready() else b""
                err = channel.recv_stderr(chunk) if channel.recv_stderr_ready() else b""
            if data:
                write(data)  # a failing sink raises its own error, never TransportLost
            if err:
                kept = err if stderr_limit is None else err[: max(stderr_limit - len(errors), 0)]
                errors += kept
                dropped += len(err) - len(kept)
            if data or err:
                continue
            if channel.eof_received or channel.closed:
                # Data fed before the EOF may have arrived since the readiness checks.
                if not (channel.recv_ready() or channel.recv_stderr_ready()):
                    break
                continue
            select.select([wake], [], [], _remaining(deadline))
        while not channel.status_event.wait(_remaining(deadline)):
            pass
        if dropped:
            errors += f"\n[{dropped} more bytes of stderr not kept]\n".encode()
        return bytes(errors)

    # -- the connection -----------------------------------------------------------------------

    def _environment(self) -> Mapping[str, str]:
        return os.environ if self._env is None else self._env

    def _ensure_connected(self) -> Any:
        with self._lock:
            client = self._client
            transport = client.get_transport() if client is not None else None
            if transport is not None and transport.is_active():
                return transport
            lost = self._connections > 0
            self._drop()
            return self._connect_with_backoff(lost=lost)

    def _connect_with_backoff(self, *, lost: bool) -> Any:
        last: TransportLost | None = None
        for attempt in range(self.reconnect_attempts):
            if attempt:
                self._sleep(min(self.reconnect_backoff * 2 ** (attempt - 1), MAX_BACKOFF_SECONDS))
            try:
                with map_ssh_errors(
                    f"connect to {self.label}", host=self.label, secrets=self.secrets()
                ):
                    return self._connect_once()
            except TransportLost as exc:
                last = exc  # transient (refused, reset, timed out): try again
        assert last is not None
        tries = f"{self.reconnect_attempts} attempt{'s' if self.reconnect_attempts > 1 else ''}"
        if lost:
            message = f"connection to {self.label} lost and not re-established after {tries}"
            raise TransportLost(message, evidence=f"{message}; last error: {last.evidence}")
        message = f"cannot connect to {self.label} after {tries}"
        raise BackendUnavailable(message, evidence=f"{message}; last error: {last.evidence}")

    def _connect_once(self) -> Any:
        key = self._load_key()
        if key is not None:
            auth: dict[str, Any] = {"pkey": key, "look_for_keys": False, "allow_agent": False}
        else:
            auth = {"passphrase": self._passphrase}
        timeouts = {
            "timeout": self.connect_timeout,
            "banner_timeout": self.connect_timeout,
            "auth_timeout": self.connect_timeout,
            "channel_timeout": self.connect_timeout,
        }
        jump = client = None
        try:
            sock = None
            if self.jump_host is not None:
                jump = self._new_client()
                jump.connect(
                    self.jump_host,
                    port=self.jump_port,
                    username=self.jump_user or self.user,
                    transport_factory=self._make_transport,
                    **auth,
                    **timeouts,
                )
                self._tune(jump.get_transport())
                sock = jump.get_transport().open_channel(
                    "direct-tcpip",
                    (self.host, self.port),
                    ("127.0.0.1", 0),
                    window_size=self.window_size,
                    max_packet_size=self.max_packet_size,
                    timeout=self.connect_timeout,
                )
            client = self._new_client()
            client.connect(
                self.host,
                port=self.port,
                username=self.user,
                sock=sock,
                transport_factory=self._make_transport,
                **auth,
                **timeouts,
            )
            transport = client.get_transport()
            self._tune(transport)
        except BaseException:
            for opened in (client, jump):
                if opened is not None:
                    opened.close()
            raise
        self._client, self._jump = client, jump
        self._connections += 1
        return transport

    def _new_client(self) -> Any:
        client = paramiko.SSHClient()
        try:
            if self.known_hosts is not None:
                client.load_host_keys(str(Path(self.known_hosts).expanduser()))
            else:
                client.load_system_host_keys()
        except (OSError, paramiko.SSHException) as exc:
            message = f"cannot read known_hosts file {self.known_hosts_label}: {_describe(exc)}"
            raise _not_retryable(BackendUnavailable(message)) from None
        for hostname, key in self._accepted:
            client.get_host_keys().add(hostname, key.get_name(), key)
        client.set_missing_host_key_policy(_HostKeyPolicy(self))
        return client

    def _make_transport(self, sock: Any, **kwargs: Any) -> Any:
        """paramiko's Transport with our window, packet size and cipher preference."""
        transport = paramiko.Transport(
            sock,
            default_window_size=self.window_size,
            default_max_packet_size=self.max_packet_size,
            **kwargs,
        )
        options = transport.get_security_options()
        available = tuple(options.ciphers)
        preferred = [name for name in self.ciphers if name in available]
        options.ciphers = (*preferred, *(name for name in available if name not in preferred))
        return transport

    def _tune(self, transport: Any) -> None:
        if self.keepalive <= 0:
            return
        interval = max(1, math.ceil(self.keepalive))
        transport.set_keepalive(interval)
        sock = transport.sock
        if isinstance(sock, socket.socket) and hasattr(socket, "TCP_USER_TIMEOUT"):
            # Keepalives are writes: if three intervals pass without the peer acknowledging
            # them, the kernel drops the connection (instead of retrying for ~15 minutes), so
            # a silently dead network ends in TransportLost rather than a hang.
            milliseconds = max(3 * interval, 30) * 1000
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, milliseconds)

    def _load_key(self) -> Any:
        if self.identity_file is None:
            return None
        path = Path(self.identity_file).expanduser()
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            message = f"cannot read identity file {path}: {exc.strerror or _describe(exc)}"
            raise _not_retryable(BackendUnavailable(message)) from None
        lines = (line.strip() for line in text.splitlines())
        self._key_secrets = frozenset(
            [text, *(line for line in lines if len(line) >= 16 and "PRIVATE KEY" not in line)]
        )
        try:
            password = None if self._passphrase is None else self._passphrase.encode()
            return paramiko.PKey.from_path(path, password=password)
        except TypeError:
            reason = "it is encrypted and no passphrase was given (set passphrase_env)"
        except ValueError:
            reason = "wrong passphrase, or not a private key"
        except Exception as exc:
            reason = _describe(exc)
        message = redact(f"cannot load identity file {path}: {reason}", self.secrets())
        raise _not_retryable(BackendUnavailable(message)) from None

    def _drop(self) -> None:
        # The caller holds self._lock.
        for opened in (self._client, self._jump):
            if opened is not None:
                opened.close()
        self._client = self._jump = None


def _remaining(deadline: float | None) -> float:
    """Seconds to wait before looking again; raises _Deadline once `deadline` has passed."""
    if deadline is None:
        return _POLL_SECONDS
    left = deadline - time.monotonic()
    if left <= 0:
        raise _Deadline()
    return min(left, _POLL_SECONDS)


def _send_signal(channel: Any, name: str) -> None:
    """Ask sshd to signal the command (RFC 4254 "signal" request; paramiko has no call for
    it). Best effort: the channel is closed right after either way."""
    try:
        message = paramiko.Message()
        message.add_byte(paramiko.common.cMSG_CHANNEL_REQUEST)
        message.add_int(channel.remote_chanid)
        message.add_string("signal")
        message.add_boolean(False)
        message.add_string(name)
        channel.transport._send_user_message(message)
    except Exception:
        pass
