"""One command's channel in the `ssh` transport: its stdin, its output, its time limit.

`run_on_channel` opens the channel and starts the command (when no remote helper runs it);
the helpers here feed its stdin, copy its stdout and stderr as they come until it ends, and
ask it to stop on a timeout.
"""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Callable
from typing import Any

import paramiko
from msgspec import Struct

from vibesys.adapters.transports.ssh_errors import map_ssh_errors, redact
from vibesys.errors import BackendUnavailable, TransportLost

__all__ = [
    "POLL_SECONDS",
    "READ_SIZE",
    "ChannelSettings",
    "CommandDeadline",
    "feed_stdin",
    "pump_output",
    "remaining",
    "run_on_channel",
    "send_signal",
]

#: Bytes taken from the channel per read: big enough for few Python round trips, small enough
#: that the copies paramiko makes on each read stay small next to the window.
READ_SIZE = 1 << 20
#: Longest sleep while waiting for a channel, so deadlines and closures are rechecked.
POLL_SECONDS = 1.0


class CommandDeadline(Exception):
    """The command's time limit passed (internal: becomes BackendUnavailable)."""


def remaining(deadline: float | None) -> float:
    """Seconds to wait before looking again; raises CommandDeadline once `deadline` has passed."""
    if deadline is None:
        return POLL_SECONDS
    left = deadline - time.monotonic()
    if left <= 0:
        raise CommandDeadline()
    return min(left, POLL_SECONDS)


def feed_stdin(channel: Any, data: bytes | None) -> threading.Thread | None:
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
            pass  # the command stopped reading or the connection broke: pump_output reports it

    feeder = threading.Thread(target=send, name="vibesys-ssh-stdin", daemon=True)
    feeder.start()
    return feeder


def pump_output(
    channel: Any,
    write: Callable[[bytes], object],
    *,
    deadline: float | None,
    read_size: int,
    stderr_limit: int | None,
    what: str,
    host: str,
    maybe_effect: bool,
    secrets: frozenset[str],
) -> bytes:
    """Copy stdout into `write` and collect stderr, both as they come (the two share the
    window: draining only one could stall the command), until EOF and the exit status.
    `what`, `host`, `maybe_effect` and `secrets` describe a lost connection (`map_ssh_errors`)."""
    errors = bytearray()
    dropped = 0
    wake = channel.fileno()  # readable while either stream has data, and once closed
    while True:
        if deadline is not None and time.monotonic() >= deadline:
            raise CommandDeadline()  # checked on every round: endless output must time out too
        with map_ssh_errors(what, host=host, maybe_effect=maybe_effect, secrets=secrets):
            data = channel.recv(read_size) if channel.recv_ready() else b""
            err = channel.recv_stderr(read_size) if channel.recv_stderr_ready() else b""
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
        select.select([wake], [], [], remaining(deadline))
    while not channel.status_event.wait(remaining(deadline)):
        pass
    if dropped:
        errors += f"\n[{dropped} more bytes of stderr not kept]\n".encode()
    return bytes(errors)


def send_signal(channel: Any, name: str) -> None:
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


class ChannelSettings(Struct, frozen=True):
    """The channel's flow control and how long opening it may take."""

    window_size: int
    max_packet_size: int
    connect_timeout: float


def run_on_channel(
    transport: Any,
    command: str,
    write: Callable[[bytes], object],
    settings: ChannelSettings,
    *,
    input: bytes | None,
    timeout: float | None,
    maybe_effect: bool,
    stderr_limit: int | None,
    read_size: int,
    what: str,
    host: str,
    secrets: frozenset[str],
) -> tuple[int, str]:
    """Run `command` (a shell line for the remote user's shell) on a channel of its own, the
    way without the remote helper: its exit status and its stderr (redacted)."""
    with map_ssh_errors(what, host=host, secrets=secrets):
        channel = transport.open_session(
            window_size=settings.window_size,
            max_packet_size=settings.max_packet_size,
            timeout=settings.connect_timeout,
        )
    try:
        with map_ssh_errors(what, host=host, maybe_effect=maybe_effect, secrets=secrets):
            try:
                channel.exec_command(command)
            except paramiko.SSHException:
                if transport.is_active():
                    # The server refused the request: the command did not start.
                    raise paramiko.ChannelException(0, "exec request refused") from None
                raise
        feeder = feed_stdin(channel, input)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            stderr = pump_output(
                channel,
                write,
                deadline=deadline,
                read_size=read_size,
                stderr_limit=stderr_limit,
                what=what,
                host=host,
                maybe_effect=maybe_effect,
                secrets=secrets,
            )
        except CommandDeadline:
            send_signal(channel, "TERM")
            assert timeout is not None
            message = f"{what}: no answer within {timeout:g} s"
            raise BackendUnavailable(
                message,
                evidence=f"ssh {host}: {message}",
                maybe_submitted=maybe_effect,
            ) from None
        finally:
            if feeder is not None:
                feeder.join(timeout=POLL_SECONDS)
        status = channel.exit_status
        if status == -1 and not transport.is_active():
            # The channel closed because the connection did, before the exit status came.
            message = f"{what}: connection lost before the command's exit status arrived"
            raise TransportLost(
                message, evidence=f"ssh {host}: {message}", maybe_submitted=maybe_effect
            )
    finally:
        channel.close()
    # -1: the command ended without an exit status (killed by a signal).
    return int(status), redact(stderr.decode("utf-8", "replace"), secrets)
