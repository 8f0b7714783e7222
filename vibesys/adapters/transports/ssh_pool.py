"""The helpers of an SSH connection (`ssh_session.HelperSession`), pooled: one per
connection, more only while commands run at once, each reused until it fails; and how a
command runs through one, its failures mapped to our errors. `SshTransport` builds on this."""

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


class HelperPool(SshConnection):
    """The pool of remote helpers of one connection (see the module docstring)."""

    use_helper: bool
    read_size: int
    helpers_started: int
    _pool_lock: threading.Lock
    _idle: list[HelperSession]
    _no_helper: int | None
    _warming: threading.Event | None
    #: the shared connection's socket and transport table (JSON), when sharing is on
    share: tuple[Path, str] | None
    _shared_idle: list[HelperSession]
    _share_due: bool
    _share_off: bool

    def helper_launch(self) -> str:
        raise NotImplementedError

    def helper_argv(self, argv: Sequence[str]) -> list[str]:
        raise NotImplementedError

    def _allowed(self, env: Mapping[str, str] | None) -> dict[str, str]:
        raise NotImplementedError

    def warm(self) -> None:
        """Get a helper ready now, from the shared connection or by connecting (see
        `configured.prewarm`); errors are left to the first command, which meets them again
        and reports them."""
        if not self.use_helper:
            return
        started = threading.Event()
        self._warming = started
        try:
            helper = self._shared_helper()
            if helper is None:
                transport = self._ensure_connected()
                helper = self._take_helper(transport, "warm up", self.secrets())
            if helper is not None:
                self._give_back(helper)
        except Exception:
            pass  # the first command will say what is wrong
        finally:
            started.set()
            self._warming = None

    def _await_warming(self) -> None:
        """A helper is on its way (`warm`): take it rather than start another."""
        warming = self._warming
        if warming is not None:
            warming.wait(timeout=self.connect_timeout + 60)

    def idle_helpers(self) -> int:
        with self._pool_lock:
            return len(self._idle)

    def shared_helper_for_client(self) -> HelperSession | None:
        """A started helper of this (the sharing server's) connection for one process; None
        when there is none to give (that process connects on its own and meets the error)."""
        self._await_warming()
        try:
            return self._take_helper(self._ensure_connected(), "shared helper", self.secrets())
        except Exception:
            return None

    def _shared_helper(self) -> HelperSession | None:
        """A helper from this host's shared connection (`ssh_share`), while this process has
        no connection of its own; None to connect here. The first process that finds no
        server starts one for the next."""
        if self.share is None or self._share_off or not self.use_helper or self.connections:
            return None
        with self._pool_lock:
            while self._shared_idle:
                helper = self._shared_idle.pop()
                if helper.alive:
                    return helper
                helper.close()
        try:
            sock = ssh_share.connect(self.share[0], self.connect_timeout)
        except ssh_share.NoServer:
            self._share_due = True  # started once a helper works here (`_take_helper`)
            return None
        if sock is None:
            # A server is there but gave no helper in time (frozen, or it cannot log in): no
            # command was sent, so this process may safely go its own way, and stays on it.
            self._share_off = True
            return None
        return HelperSession(ssh_share.SocketChannel(sock), self.read_size, ssh_share.SHARED)

    def _take_helper(
        self, transport: Any, what: str, secrets: frozenset[str]
    ) -> HelperSession | None:
        """An idle helper of the current connection, or a new one; None when commands must run
        one channel each (no helper wanted, or it cannot start on this connection)."""
        generation = self.connections
        if not self.use_helper or self._no_helper == generation:
            return None
        with self._pool_lock:
            while self._idle:
                helper = self._idle.pop()
                if helper.generation == generation and helper.alive:
                    return helper
                helper.close()
        with map_ssh_errors(what, host=self.label, secrets=secrets):
            channel = transport.open_session(
                window_size=self.window_size,
                max_packet_size=self.max_packet_size,
                timeout=self.connect_timeout,
            )
        try:
            with map_ssh_errors(what, host=self.label, secrets=secrets):
                helper = HelperSession.start(
                    channel, self.helper_launch(), self.read_size, generation
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

    def _give_back(self, helper: HelperSession) -> None:
        with self._pool_lock:
            if helper.generation == ssh_share.SHARED:
                if helper.alive:
                    self._shared_idle.append(helper)
                    return
                helper.close()
                return
            if helper.generation == self.connections and helper.alive:
                self._idle.append(helper)
                return
        helper.close()

    def _through_helper(
        self,
        helper: HelperSession,
        argv: tuple[str, ...],
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
        allowed = self._allowed(env)
        healthy = False
        try:
            with map_ssh_errors(what, host=self.label, maybe_effect=maybe_effect, secrets=secrets):
                try:
                    returncode, stderr = helper.run(
                        self.helper_argv(argv),
                        write,
                        input=input,
                        timeout=timeout,
                        env=allowed or None,
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
                message, evidence=f"ssh {self.label}: {message}", maybe_submitted=maybe_effect
            ) from None
        except HelperLost:
            message = f"{what}: connection lost before the command's exit status arrived"
            raise TransportLost(
                message, evidence=f"ssh {self.label}: {message}", maybe_submitted=maybe_effect
            ) from None
        finally:
            if healthy:
                self._give_back(helper)
            else:
                helper.close()
        return returncode, redact(stderr.decode("utf-8", "replace"), secrets)
