"""One command's channel in the `ssh` transport: its stdin, its output, its time limit.

`SshTransport._execute` opens the channel and starts the command; the helpers here feed its
stdin, copy its stdout and stderr as they come until it ends, and ask it to stop on a timeout.
"""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Callable
from typing import Any

from vibesys.adapters.transports._paramiko import paramiko
from vibesys.adapters.transports.ssh_errors import map_ssh_errors

__all__ = [
    "POLL_SECONDS",
    "READ_SIZE",
    "CommandDeadline",
    "feed_stdin",
    "pump_output",
    "remaining",
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
