"""The client half of the remote helper (`_ssh_helper.py`): one helper process per SSH
connection (more only while commands run concurrently), each serving one command at a time
over its own channel.

`HelperSession.start` opens a session channel, starts the helper through the remote user's
shell (the one shell start a connection pays: ~/.bashrc runs there once) and sends it its
source; `run` sends one command (argv, environment, time limit, stdin) and copies its output
as it arrives. A helper that cannot start (no python3 on the remote side) raises
`HelperUnavailable`: the transport then runs each command in a channel of its own, as before.

Needs no paramiko itself: a helper's channel may be a paramiko channel or the socket of the
host's shared connection (`ssh_share.SocketChannel`).
"""

from __future__ import annotations

import importlib.resources
import json
import select
import shlex
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vibesys.adapters.transports.ssh_channel import CommandDeadline, remaining

__all__ = [
    "HELPER_GRACE_SECONDS",
    "CommandStartFailed",
    "HelperLost",
    "HelperSession",
    "HelperTimedOut",
    "HelperUnavailable",
    "launch_command",
]

#: What the helper prints first; anything before it is the login shell's noise.
MAGIC = b"\x00vibesys-ssh-helper-1\n"
#: How long the helper may take to come up: the remote shell's startup files run first.
START_SECONDS = 60.0
#: Past a command's time limit, how long the helper has to report it (it sends SIGTERM, then
#: SIGKILL two seconds later) before the client gives up on the helper itself.
HELPER_GRACE_SECONDS = 5.0
#: The pythons tried, in order: a system python first, so that a shim on PATH (pyenv, conda)
#: does not cost its own startup on every connection.
PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3", "python3")


class HelperUnavailable(Exception):
    """The helper did not come up (no python3, a broken shell): run commands one by one."""


class HelperLost(Exception):
    """The helper's channel closed in the middle of a command."""


def _frame_json(data: bytes) -> dict[str, object]:
    """A frame's JSON object; a garbled one means the helper is lost (as a closed channel)."""
    try:
        value = json.loads(data)
    except ValueError:
        raise HelperLost(f"the remote helper sent a garbled frame: {data[:200]!r}") from None
    if not isinstance(value, dict):
        raise HelperLost(f"the remote helper sent a frame that is not an object: {data[:200]!r}")
    return value


class HelperTimedOut(Exception):
    """The command outlived its time limit. `answered`: the helper stopped it and said so
    (it is ready for the next command); otherwise the helper itself stopped answering and is
    in the middle of that command: it must not be used again."""

    def __init__(self, answered: bool = False) -> None:
        super().__init__("timed out")
        self.answered = answered


class CommandStartFailed(Exception):
    """The helper could not start the command: exec(2) failed with `errno`."""

    def __init__(self, errno: int | None, strerror: str, filename: str | None) -> None:
        super().__init__(strerror)
        self.errno = errno
        self.strerror = strerror
        self.filename = filename


def helper_source() -> bytes:
    source = importlib.resources.files("vibesys.adapters.transports").joinpath("_ssh_helper.py")
    return source.read_bytes()


def launch_command(
    shell: Sequence[str], source_size: int, pythons: Sequence[str] = PYTHONS
) -> list[str]:
    """The argv (for the remote user's shell to run) that starts the helper: `shell` (`sh -c`,
    or `bash -lc` for a login shell) runs a loop that execs the first python found, which
    reads its own source from the channel."""
    boot = f"import sys; exec(sys.stdin.buffer.read({source_size}))"
    tries = " ".join(shlex.quote(python) for python in pythons)
    script = (
        f'for p in {tries}; do command -v "$p" >/dev/null 2>&1 && exec "$p" -I -c "{boot}"; '
        'done; echo "vibesys: no python3 on the remote side" >&2; exit 127'
    )
    return [*shell, script]


class HelperSession:
    """One running helper and its channel."""

    def __init__(self, channel: Any, read_size: int, generation: int) -> None:
        self.channel = channel
        self.read_size = read_size
        #: which connection of the transport it belongs to
        self.generation = generation
        self._buffer = bytearray()
        self._noise = bytearray()

    @classmethod
    def start(cls, channel: Any, command: str, read_size: int, generation: int) -> HelperSession:
        """Start the helper on a fresh session `channel` with the shell command line
        `command`; HelperUnavailable when it does not come up."""
        session = cls(channel, read_size, generation)
        source = helper_source()
        channel.exec_command(command)
        channel.sendall(source)
        deadline = time.monotonic() + START_SECONDS
        try:
            while MAGIC not in session._buffer:
                if not session._fill(deadline):
                    raise HelperUnavailable(session._failure_text())
                # The login shell may print (a motd, echo in ~/.bashrc): keep only the tail.
                cut = session._buffer.rfind(MAGIC[:1])
                if cut > 0 and MAGIC not in session._buffer:
                    del session._buffer[:cut]
            del session._buffer[: session._buffer.index(MAGIC) + len(MAGIC)]
            kind, payload = session._frame(deadline)
        except HelperTimedOut:
            raise HelperUnavailable("the remote helper did not start in time") from None
        except HelperLost:
            raise HelperUnavailable(session._failure_text()) from None
        if kind != b"R":
            raise HelperUnavailable(f"the remote helper answered {kind!r} instead of ready")
        del payload
        return session

    @property
    def alive(self) -> bool:
        return not (self.channel.closed or self.channel.exit_status_ready())

    def close(self) -> None:
        self.channel.close()

    def run(
        self,
        argv: Sequence[str],
        write: Callable[[bytes], object],
        *,
        input: bytes | None,
        timeout: float | None,
        env: Mapping[str, str] | None,
        stderr_limit: int | None,
    ) -> tuple[int, bytes]:
        """Run `argv` through the helper: (exit status, stderr). Raises HelperTimedOut,
        CommandStartFailed, HelperLost; paramiko's and the socket's errors pass through."""
        data = input or b""
        request = {
            "argv": list(argv),
            "env": None if env is None else dict(env),
            "timeout": timeout,
            "stdin": len(data),
        }
        self.channel.sendall(json.dumps(request).encode("utf-8") + b"\n" + data)
        deadline = None if timeout is None else time.monotonic() + timeout + HELPER_GRACE_SECONDS
        errors = bytearray()
        dropped = 0

        def keep_error(chunk: bytes) -> None:
            nonlocal dropped
            room = len(chunk) if stderr_limit is None else max(stderr_limit - len(errors), 0)
            errors.extend(chunk[:room])
            dropped += len(chunk) - min(room, len(chunk))

        while True:
            kind, length = self._header(deadline)
            if kind == b"o":
                self._copy(length, write, deadline)
            elif kind == b"e":
                self._copy(length, keep_error, deadline)
            elif kind == b"x":
                end = _frame_json(self._take(length, deadline))
                if end.get("timeout"):
                    raise HelperTimedOut(answered=True)
                if dropped:
                    errors.extend(f"\n[{dropped} more bytes of stderr not kept]\n".encode())
                rc = end.get("rc")
                if not isinstance(rc, int):
                    raise HelperLost(f"the remote helper's end frame has no status: {end!r:.200}")
                return rc, bytes(errors)
            elif kind == b"E":
                failed = _frame_json(self._take(length, deadline))
                errno, filename = failed.get("errno"), failed.get("filename")
                raise CommandStartFailed(
                    errno if isinstance(errno, int) else None,
                    str(failed.get("strerror")),
                    filename if isinstance(filename, str) else None,
                )
            else:
                raise HelperLost(f"the remote helper sent a frame of unknown kind {kind!r}")

    # -- reading frames -----------------------------------------------------------------------

    def _recv(self, deadline: float | None, limit: int) -> bytes | None:
        """Up to `limit` bytes of the helper's stdout as soon as some are there; None at EOF.
        Its stderr (the login shell's noise) is drained on the way and its tail kept."""
        channel = self.channel
        while True:
            if channel.recv_stderr_ready():
                self._noise.extend(channel.recv_stderr(self.read_size))
                del self._noise[:-4096]
            if channel.recv_ready():
                data: bytes = channel.recv(limit)
                return data or None
            if channel.eof_received or channel.closed:
                if channel.recv_ready():
                    continue
                return None
            try:
                wait = remaining(deadline)
            except CommandDeadline:
                raise HelperTimedOut() from None
            select.select([channel.fileno()], [], [], wait)

    def _fill(self, deadline: float | None) -> bool:
        """Receive what is there into the buffer; False at EOF."""
        data = self._recv(deadline, self.read_size)
        if data is None:
            return False
        self._buffer.extend(data)
        return True

    def _need(self, count: int, deadline: float | None) -> None:
        while len(self._buffer) < count:
            if not self._fill(deadline):
                raise HelperLost("the remote helper's channel closed")

    def _header(self, deadline: float | None) -> tuple[bytes, int]:
        self._need(5, deadline)
        kind = bytes(self._buffer[:1])
        (length,) = struct.unpack(">I", self._buffer[1:5])
        del self._buffer[:5]
        return kind, length

    def _frame(self, deadline: float | None) -> tuple[bytes, bytes]:
        kind, length = self._header(deadline)
        return kind, self._take(length, deadline)

    def _take(self, length: int, deadline: float | None) -> bytes:
        self._need(length, deadline)
        payload = bytes(self._buffer[:length])
        del self._buffer[:length]
        return payload

    def _copy(self, length: int, sink: Callable[[bytes], object], deadline: float | None) -> None:
        """Pass `length` payload bytes to `sink` as they arrive (a big frame never sits whole
        in memory; past what is buffered, bytes go from the channel straight to the sink)."""
        left = length
        while left:
            if self._buffer:
                piece = bytes(self._buffer[:left])
                del self._buffer[: len(piece)]
            else:
                received = self._recv(deadline, min(left, self.read_size))
                if received is None:
                    raise HelperLost("the remote helper's channel closed")
                piece = received
            left -= len(piece)
            sink(piece)

    def _failure_text(self) -> str:
        said = bytes(self._noise + self._buffer).decode("utf-8", "replace").strip()
        status = self.channel.exit_status if self.channel.exit_status_ready() else None
        detail = f" (exit status {status})" if status is not None else ""
        return f"the remote helper did not start{detail}: {said[-300:] or 'no output'}"
