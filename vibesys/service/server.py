"""A socket service's course, the same for the bridge and the broker: a private listener whose
accept loop only hands off to the gate (`connections`), one request line per connection read
by its deadline and then admitted or refused, replies sent whole one at a time, a watcher that
notices the peer leaving, heartbeats while nothing else is said, and a teardown that ends every
connection within its grace.

A refusal names the field at fault when the service's protocol says which, and never repeats
what the request held: an unexpected failure is told to the peer by its kind only.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from vibesys.osutil.private_dir import listen_private
from vibesys.service.connections import Connection, Gate, IncompleteLine, Limits
from vibesys.service.framing import LineDecoder, ProtocolError, Refusal

__all__ = ["ReplySink", "SocketService", "StopFlag"]

R = TypeVar("R")
T = TypeVar("T")

#: How long the accept loop waits before it looks at its stop flag again.
_ACCEPT_SECONDS = 0.2


class StopFlag(Protocol):
    def is_set(self) -> bool: ...


class SocketService:
    """One service's socket: `listen`, `accept_until` a stop flag, `read_call` on each
    connection, then `stop_listening` (no new connections) and `close` (teardown)."""

    def __init__(
        self,
        name: str,
        socket_path: Path,
        allowed_uids: Collection[int],
        limits: Limits,
        busy_line: Callable[[str, float], bytes],
        refused_line: Callable[[str, str | None], bytes],
        log: Callable[[str], None],
    ) -> None:
        self.name = name
        self.socket_path = socket_path
        self.allowed_uids = allowed_uids
        self.log = log
        self.gate = Gate(name, limits, busy_line, lambda message: refused_line(message, None), log)
        self._refused_line = refused_line
        self._listener: socket.socket | None = None
        self._closing = threading.Event()

    @property
    def closing(self) -> bool:
        return self._closing.is_set()

    def listen(self) -> None:
        """Bind the socket (owner-only) in its directory, which the caller made private and
        whose stale socket it found dead."""
        listener = listen_private(self.socket_path, 16)
        listener.settimeout(_ACCEPT_SECONDS)
        self._listener = listener

    def accept_until(self, stop: StopFlag, serve: Callable[[Connection], None]) -> None:
        """Accept connections until `stop` is set or the listener closes, handing each to the
        gate: never waits on a peer."""
        listener = self._listener
        assert listener is not None, "listen() first"
        while not stop.is_set() and not self._closing.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # the listener was closed under us: teardown
            self.gate.admit(conn, self.allowed_uids, serve)

    def stop_listening(self) -> None:
        """No new connections (the socket file goes); the connections served go on."""
        self._closing.set()
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()

    def close(self, grace_seconds: float) -> None:
        """Stop listening and end every connection: each one's `stop` is set at once, those
        still sending their request are cut, the others get `grace_seconds` (and a second)."""
        self.stop_listening()
        self.gate.close(grace_seconds)

    def read_call(self, conn: Connection, limit: int, admit: Callable[[bytes], T]) -> T | None:
        """The connection's request line, up to `limit` bytes by its deadline, as `admit`
        makes of it; None when it was refused (the refusal sent, and logged) or the peer left.
        `admit` raises ProtocolError or Refusal to refuse."""
        peer = conn.peer
        try:
            return admit(conn.read_line(LineDecoder(limit)))
        except IncompleteLine as exc:
            self.log(f"refused pid={peer.pid} uid={peer.uid}: request: {exc}")
            conn.finish(self._refused_line(f"request: {exc}", None))
        except (ProtocolError, Refusal) as exc:
            self.log(f"refused pid={peer.pid} uid={peer.uid}: {exc}")
            conn.finish(self._refused_line(str(exc), exc.field))
        except OSError:
            pass  # gone before its request arrived (or cut by teardown)
        except Exception as exc:  # a bug: say so, rather than leave the peer retrying
            self.log(f"pid={peer.pid}: failed: {type(exc).__name__}: {exc}")
            # Only the kind of failure to the peer: the text may hold what the request held.
            failed = f"the {self.name} failed ({type(exc).__name__}); see its log"
            conn.finish(self._refused_line(failed, None))
        return None


class ReplySink(Generic[R]):
    """Replies to one peer, each line whole (one sender at a time). A failed send means the
    peer is gone: `gone` is set and nothing more is sent."""

    def __init__(
        self, sock: socket.socket, encode: Callable[[R], bytes], gone: threading.Event
    ) -> None:
        self.gone = gone
        self._sock = sock
        self._encode = encode
        self._lock = threading.Lock()
        self._failed = False
        self._last_sent = time.monotonic()

    def send(self, reply: R) -> None:
        with self._lock:
            if self._failed:
                return
            try:
                self._sock.sendall(self._encode(reply))
            except OSError:
                self._failed = True
                self.gone.set()
            self._last_sent = time.monotonic()

    def heartbeat(self, reply: R, every: float) -> None:
        """Send `reply` when nothing else went for `every` seconds: the peer's sign that its
        service is there while the work is quiet."""
        if time.monotonic() - self._last_sent >= every:
            self.send(reply)

    def watch(self) -> None:
        """Set `gone` once the peer's end closes, from a thread of its own. The peer sends
        nothing after its request: whatever arrives is read and dropped, never buffered."""
        threading.Thread(target=self._watch, name="vibesys-peer-watch", daemon=True).start()

    def _watch(self) -> None:
        try:
            while self._sock.recv(4096):
                pass
        except OSError:
            pass
        self.gone.set()
