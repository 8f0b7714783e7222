"""The connection under the `ssh` transport: one paramiko `SSHClient`, opened on demand.

`SshConnection` opens the connection at the first command, reuses it while it is alive and, once
it is lost, reconnects with bounded exponential backoff. The host key is verified against the
configured known_hosts; an unknown host is refused unless the operator opted in
(`accept_unknown_host`), and a changed key is always refused. A jump host, when configured,
carries the connection through a `direct-tcpip` channel. Running commands over the connection is
`SshTransport`'s job (`vibesys.adapters.transports.ssh`), which holds one.
"""

from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import paramiko

from vibesys.adapters.transports.ssh_errors import (
    UnknownHostKey,
    describe_exception,
    host_key_fingerprint,
    map_ssh_errors,
    misconfigured,
    redact,
)
from vibesys.adapters.transports.ssh_settings import SshSettings
from vibesys.errors import BackendUnavailable, TransportLost

__all__ = ["MAX_BACKOFF_SECONDS", "SshConnection"]

#: Longest single wait between two connection attempts.
MAX_BACKOFF_SECONDS = 60.0


class _HostKeyPolicy:
    """paramiko's missing-host-key hook: refuse, or (opted in) trust and remember in memory."""

    def __init__(self, owner: SshConnection) -> None:
        self._owner = owner

    def missing_host_key(self, client: Any, hostname: str, key: Any) -> None:
        fingerprint = host_key_fingerprint(key)
        if not self._owner.settings.accept_unknown_host:
            raise UnknownHostKey(
                hostname, key.get_name(), fingerprint, self._owner.settings.known_hosts_label
            )
        # Remembered for this transport's later connections: a different key for the same
        # host is then a changed key (refused), not another unknown one.
        self._owner._accepted.append((hostname, key))
        client.get_host_keys().add(hostname, key.get_name(), key)


class SshConnection:
    """One SSH connection as `settings` describe it (through the jump host when set), opened
    on first use and reopened with backoff after it is lost; see the module docstring.

    Thread-safe: `ensure_connected` hands every caller the same live connection.
    `close()` drops it; the next use opens a new one.
    """

    def __init__(
        self,
        settings: SshSettings,
        *,
        passphrase: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self._passphrase = passphrase
        self._sleep = sleep
        self._lock = threading.Lock()
        self._client: Any = None
        self._jump: Any = None
        self._connections = 0
        self._accepted: list[tuple[str, Any]] = []
        self._key_secrets: frozenset[str] = frozenset()

    # -- what a caller may look at ------------------------------------------------------------

    @property
    def label(self) -> str:
        """`user@host:port`, as messages name the remote side."""
        return self.settings.label

    @property
    def accepted_unknown_hosts(self) -> tuple[str, ...]:
        """Hosts whose key was not in known_hosts and was trusted (`accept_unknown_host`)."""
        return tuple(hostname for hostname, _ in self._accepted)

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
        """The values `redact` removes from everything this connection reports: the
        passphrase and the identity file's contents."""
        found = set(self._key_secrets)
        if self._passphrase:
            found.add(self._passphrase)
        return frozenset(found)

    def connect(self) -> None:
        """Open the connection now (commands open it on demand anyway)."""
        self.ensure_connected()

    def close(self) -> None:
        """Drop the connection (commands in flight on it end with TransportLost)."""
        with self._lock:
            self._drop()

    # -- the connection -----------------------------------------------------------------------

    def ensure_connected(self) -> Any:
        """The live connection's `paramiko.Transport`, connecting (again) when there is none."""
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
        for attempt in range(self.settings.reconnect_attempts):
            if attempt:
                self._sleep(
                    min(self.settings.reconnect_backoff * 2 ** (attempt - 1), MAX_BACKOFF_SECONDS)
                )
            try:
                with map_ssh_errors(
                    f"connect to {self.label}",
                    host=self.label,
                    secrets=self.secrets(),
                    identity=self.settings.identity_file,
                ):
                    return self._connect_once()
            except TransportLost as exc:
                last = exc  # transient (refused, reset, timed out): try again
        assert last is not None
        attempts = self.settings.reconnect_attempts
        tries = f"{attempts} attempt{'s' if attempts > 1 else ''}"
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
            "timeout": self.settings.connect_timeout,
            "banner_timeout": self.settings.connect_timeout,
            "auth_timeout": self.settings.connect_timeout,
            "channel_timeout": self.settings.connect_timeout,
        }
        jump = client = None
        try:
            sock = None
            if self.settings.jump_host is not None:
                jump = self._new_client()
                jump.connect(
                    self.settings.jump_host,
                    port=self.settings.jump_port,
                    username=self.settings.jump_user or self.settings.user,
                    transport_factory=self._make_transport,
                    **auth,
                    **timeouts,
                )
                self._tune(jump.get_transport())
                sock = jump.get_transport().open_channel(
                    "direct-tcpip",
                    (self.settings.host, self.settings.port),
                    ("127.0.0.1", 0),
                    window_size=self.settings.window_size,
                    max_packet_size=self.settings.max_packet_size,
                    timeout=self.settings.connect_timeout,
                )
            client = self._new_client()
            client.connect(
                self.settings.host,
                port=self.settings.port,
                username=self.settings.user,
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
            if self.settings.known_hosts is not None:
                client.load_host_keys(str(Path(self.settings.known_hosts).expanduser()))
            else:
                client.load_system_host_keys()
        except Exception as exc:  # paramiko raises assorted types for a malformed file
            reason = describe_exception(exc)
            known_hosts = self.settings.known_hosts_label
            message = f"cannot read known_hosts file {known_hosts}: {reason}"
            fix = f"repair or replace {known_hosts} (one `host keytype key` per line)"
            raise misconfigured(message, fix) from None
        for hostname, key in self._accepted:
            client.get_host_keys().add(hostname, key.get_name(), key)
        client.set_missing_host_key_policy(_HostKeyPolicy(self))
        return client

    def _make_transport(self, sock: Any, **kwargs: Any) -> Any:
        """paramiko's Transport with our window, packet size and cipher preference."""
        transport = paramiko.Transport(
            sock,
            default_window_size=self.settings.window_size,
            default_max_packet_size=self.settings.max_packet_size,
            **kwargs,
        )
        options = transport.get_security_options()
        available = tuple(options.ciphers)
        preferred = [name for name in self.settings.ciphers if name in available]
        options.ciphers = (*preferred, *(name for name in available if name not in preferred))
        return transport

    def _tune(self, transport: Any) -> None:
        if self.settings.keepalive <= 0:
            return
        interval = max(1, math.ceil(self.settings.keepalive))
        transport.set_keepalive(interval)
        sock = transport.sock
        if isinstance(sock, socket.socket) and hasattr(socket, "TCP_USER_TIMEOUT"):
            # Keepalives are writes: if three intervals pass without the peer acknowledging
            # them, the kernel drops the connection (instead of retrying for ~15 minutes), so
            # a silently dead network ends in TransportLost rather than a hang.
            milliseconds = max(3 * interval, 30) * 1000
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, milliseconds)

    def _load_key(self) -> Any:
        if self.settings.identity_file is None:
            return None
        path = Path(self.settings.identity_file).expanduser()
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            reason = exc.strerror or describe_exception(exc)
            message = f"cannot read identity file {path}: {reason}"
            raise misconfigured(message, f"make {path} readable, or fix identity_file") from None
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
            reason = describe_exception(exc)
        message = redact(f"cannot load identity file {path}: {reason}", self.secrets())
        fix = "check identity_file and passphrase_env"
        raise misconfigured(message, fix) from None

    def _drop(self) -> None:
        # The caller holds self._lock.
        for opened in (self._client, self._jump):
            if opened is not None:
                opened.close()
        self._client = self._jump = None
