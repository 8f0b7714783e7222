"""The helpers of an SSH connection (`ssh_session.HelperSession`), pooled: one per
connection, more only while commands run at once, each reused until it fails; and how a
command runs through one, its failures mapped to our errors. `SshTransport` holds one pool."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from vibesys.adapters.transports import ssh_share
from vibesys.adapters.transports.base import map_transport_errors
from vibesys.adapters.transports.ssh_connect import SshConnection
from vibesys.adapters.transports.ssh_errors import map_ssh_errors, redact
from vibesys.adapters.transports.ssh_session import (
    CommandStartFailed,
    HelperLost,
    HelperSession,
    HelperTimedOut,
    HelperUnavailable,
)
from vibesys.errors import BackendUnavailable, TransportLost

__all__ = ["HelperPool"]


class HelperPool:
    """The pool of remote helpers of one connection (see the module docstring), started with
    the shell line `launch`; `share` is this host's shared connection for the site (its socket
    and transport table, JSON), when sharing is on."""

    def __init__(
        self,
        connection: SshConnection,
        *,
        launch: str,
        share: tuple[Path, str] | None = None,
    ) -> None:
        self.connection = connection
        self.settings = connection.settings
        self.launch = launch
        self.share = share
        #: helpers started so far (for tests and benchmarks)
        self.helpers_started = 0
        self._lock = threading.Lock()
        #: helpers waiting for a command, of the current connection
        self._idle: list[HelperSession] = []
        #: the connection on which the helper could not start (then: a channel per command)
        self._no_helper: int | None = None
        #: set while `warm` starts a helper: a command waits for it rather than start another
        self._warming: threading.Event | None = None
        self._shared_idle: list[HelperSession] = []
        self._share_due = False
        self._share_off = False

    def warm(self) -> None:
        """Get a helper ready now, from the shared connection or by connecting (see
        `configured.prewarm`); errors are left to the first command, which meets them again
        and reports them."""
        if not self.settings.use_helper:
            return
        started = threading.Event()
        self._warming = started
        try:
            helper = self.shared_helper()
            if helper is None:
                transport = self.connection.ensure_connected()
                helper = self.take_helper(transport, "warm up", self.connection.secrets())
            if helper is not None:
                self.give_back(helper)
        except Exception:
            pass  # the first command will say what is wrong
        finally:
            started.set()
            self._warming = None

    def await_warming(self) -> None:
        """A helper is on its way (`warm`): take it rather than start another."""
        warming = self._warming
        if warming is not None:
            warming.wait(timeout=self.settings.connect_timeout + 60)

    def idle_helpers(self) -> int:
        with self._lock:
            return len(self._idle)

    def shared_helper_for_client(self) -> HelperSession | None:
        """A started helper of this (the sharing server's) connection for one process; None
        when there is none to give (that process connects on its own and meets the error)."""
        self.await_warming()
        try:
            return self.take_helper(
                self.connection.ensure_connected(), "shared helper", self.connection.secrets()
            )
        except Exception:
            return None

    def shared_helper(self) -> HelperSession | None:
        """A helper from this host's shared connection (`ssh_share`), while this process has
        no connection of its own; None to connect here. The first process that finds no
        server starts one for the next."""
        if (
            self.share is None
            or self._share_off
            or not self.settings.use_helper
            or self.connection.connections
        ):
            return None
        with self._lock:
            while self._shared_idle:
                helper = self._shared_idle.pop()
                if helper.alive:
                    return helper
                helper.close()
        try:
            sock = ssh_share.connect(self.share[0], self.settings.connect_timeout)
        except ssh_share.NoServer:
            self._share_due = True  # started once a helper works here (`take_helper`)
            return None
        if sock is None:
            # A server is there but gave no helper in time (frozen, or it cannot log in): no
            # command was sent, so this process may safely go its own way, and stays on it.
            self._share_off = True
            return None
        return HelperSession(
            ssh_share.SocketChannel(sock), self.settings.read_size, ssh_share.SHARED
        )

    def take_helper(
        self, transport: Any, what: str, secrets: frozenset[str]
    ) -> HelperSession | None:
        """An idle helper of the current connection, or a new one; None when commands must run
        one channel each (no helper wanted, or it cannot start on this connection)."""
        generation = self.connection.connections
        if not self.settings.use_helper or self._no_helper == generation:
            return None
        with self._lock:
            while self._idle:
                helper = self._idle.pop()
                if helper.generation == generation and helper.alive:
                    return helper
                helper.close()
        with map_ssh_errors(what, host=self.connection.label, secrets=secrets):
            channel = transport.open_session(
                window_size=self.settings.window_size,
                max_packet_size=self.settings.max_packet_size,
                timeout=self.settings.connect_timeout,
            )
        try:
            with map_ssh_errors(what, host=self.connection.label, secrets=secrets):
                helper = HelperSession.start(
                    channel, self.launch, self.settings.read_size, generation
                )
        except HelperUnavailable:
            channel.close()
            self._no_helper = generation
            return None
        except BaseException:
            channel.close()
            raise
        self.helpers_started += 1
        if self._share_due and self.share is not None:
            # This process found no shared server: it starts one for the next processes now
            # that a login and a helper have worked here (a server that cannot have them would
            # only add a failed login per process). A dead server's socket file goes with it.
            self._share_due = False
            ssh_share.spawn(*self.share)
        return helper

    def close(self) -> None:
        """Stop the idle helpers (the connection itself is the caller's to close)."""
        with self._lock:
            idle, self._idle = self._idle, []
            idle += self._shared_idle
            self._shared_idle = []
        for helper in idle:
            helper.close()

    def give_back(self, helper: HelperSession) -> None:
        with self._lock:
            if helper.generation == ssh_share.SHARED:
                if helper.alive:
                    self._shared_idle.append(helper)
                    return
                helper.close()
                return
            if helper.generation == self.connection.connections and helper.alive:
                self._idle.append(helper)
                return
        helper.close()

    def run_through(
        self,
        helper: HelperSession,
        argv: Sequence[str],
        write: Callable[[bytes], object],
        *,
        what: str,
        secrets: frozenset[str],
        input: bytes | None,
        timeout: float | None,
        maybe_effect: bool,
        stderr_limit: int | None,
        env: Mapping[str, str] | None,
    ) -> tuple[int, str]:
        """Run `argv` (as the helper starts it) through `helper` with the variables `env`:
        (exit status, redacted stderr). The helper goes back to the pool while it is sound."""
        healthy = False
        try:
            with map_ssh_errors(
                what, host=self.connection.label, maybe_effect=maybe_effect, secrets=secrets
            ):
                try:
                    returncode, stderr = helper.run(
                        argv,
                        write,
                        input=input,
                        timeout=timeout,
                        env=env,
                        stderr_limit=stderr_limit,
                    )
                except CommandStartFailed as failed:
                    healthy = True
                    # The program never started: the same verdicts as a local exec(2).
                    with map_transport_errors(what):
                        raise OSError(failed.errno, failed.strerror, failed.filename) from None
                    raise AssertionError("unreachable") from None
            healthy = True
        except HelperTimedOut as timed_out:
            # A helper that stopped answering is still inside that command: never reuse it.
            healthy = timed_out.answered and helper.alive
            message = f"{what}: no answer within {timeout:g} s"
            raise BackendUnavailable(
                message,
                evidence=f"ssh {self.connection.label}: {message}",
                maybe_submitted=maybe_effect,
            ) from None
        except HelperLost:
            message = f"{what}: connection lost before the command's exit status arrived"
            raise TransportLost(
                message,
                evidence=f"ssh {self.connection.label}: {message}",
                maybe_submitted=maybe_effect,
            ) from None
        finally:
            if healthy:
                self.give_back(helper)
            else:
                helper.close()
        return returncode, redact(stderr.decode("utf-8", "replace"), secrets)
