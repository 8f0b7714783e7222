"""The connection admission layer of every socket service (the evaluation bridge, the GPU
broker): who may connect, how many at once, how long a peer may take, so that no peer can
starve a service or stretch one of its waits.

- The accept loop only accepts and hands off (`Gate.admit`): the peer's credentials are read
  (SO_PEERCRED, recorded by the kernel at connect: nothing to wait for); a uid not allowed, or
  a connection past the caps (all connections, and those of one uid), is answered with a line
  sent without blocking and handed to the drainer; any other starts its own worker thread.
- A request line has an absolute deadline, counted from the accept (`Connection.read_line`):
  each recv waits at most what is left, so bytes trickling in cannot extend it.
- A connection that is answered for the last time (a refusal, a busy answer, a short answer)
  frees its slot at once and is drained by one thread for all of them, so that the peer reads
  the answer rather than a reset: at most `drain_bytes`, within `drain_seconds` of the answer,
  whatever the peer keeps sending.
- `Gate.close` ends every connection within its grace: each one's `stop` is set at once, then
  their sockets are shut down, which wakes each thread blocked on one, and the workers are
  daemon threads that never hold up the exit.

Nothing of vibesys: each service brings its own lines.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection
from typing import Protocol

import msgspec

__all__ = ["Connection", "Gate", "IncompleteLine", "Limits", "PeerCredentials", "peer_credentials"]


class PeerCredentials(msgspec.Struct, frozen=True):
    pid: int
    uid: int
    gid: int


def peer_credentials(conn: socket.socket) -> PeerCredentials:
    """The connecting process, as the kernel recorded it at connect()."""
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return PeerCredentials(pid, uid, gid)


class Limits(msgspec.Struct, frozen=True):
    """A service's bounds (the defaults are the services'; tests shrink them)."""

    #: connections served at once, and of them by one uid
    max_connections: int = 64
    max_per_uid: int = 32
    #: from the accept to the request line's newline, however the bytes come
    request_seconds: float = 5.0
    #: what a connection answered for the last time is read of, and for how long at most
    drain_bytes: int = 64 * 1024
    drain_seconds: float = 1.0
    #: connections drained at once; past it one is closed at once
    max_draining: int = 256
    #: how long one send may block on a peer that stopped reading
    send_seconds: float = 30.0
    #: what a busy answer suggests: a slot frees within `request_seconds` at the latest
    retry_after: float = 1.0


class IncompleteLine(Exception):
    """No complete request line: the message says why, for the peer (it echoes nothing)."""


class Decoder(Protocol):
    def feed(self, data: bytes) -> list[bytes]: ...

    def pending(self) -> bytes: ...


class Connection:
    """One admitted connection: its socket, its peer, its request line's deadline."""

    def __init__(self, sock: socket.socket, peer: PeerCredentials, limits: Limits) -> None:
        self.sock = sock
        self.peer = peer
        self.deadline = time.monotonic() + limits.request_seconds
        self._limits = limits
        self._lock = threading.Lock()
        self._gone = False  # closed, or handed to the drainer: no longer ours to touch
        self.reading = True
        self.finished = False
        #: set when the service tears down: the connection's work stops and answers last
        self.stop = threading.Event()

    def read_line(self, decoder: Decoder) -> bytes:
        """The request line (without its newline), by the deadline; IncompleteLine when it
        does not come whole, ConnectionResetError when the peer left before a byte."""
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise IncompleteLine(f"no complete line within {self._limits.request_seconds:g} s")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue  # the deadline, checked above
            if not data:
                if decoder.pending():
                    raise IncompleteLine("truncated (the connection ended before its newline)")
                raise ConnectionResetError("closed before a request")
            lines = decoder.feed(data)
            if lines:
                self.reading = False
                self.sock.settimeout(None)
                seconds = self._limits.send_seconds
                whole = int(seconds)
                timeval = struct.pack("ll", whole, int((seconds - whole) * 1e6))
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
                return lines[0]

    def finish(self, line: bytes) -> None:
        """Send a last line (bounded in time); the gate then drains the connection."""
        self.finished = True
        with contextlib.suppress(OSError):
            self.sock.settimeout(self._limits.drain_seconds)
            self.sock.sendall(line)
            self.sock.shutdown(socket.SHUT_WR)

    def shutdown(self) -> None:
        """Wake whatever blocks on the socket (closing alone would not)."""
        with self._lock:
            if not self._gone:
                with contextlib.suppress(OSError):
                    self.sock.shutdown(socket.SHUT_RDWR)

    def release(self) -> socket.socket | None:
        """The socket, no longer this connection's (None: already released)."""
        with self._lock:
            if self._gone:
                return None
            self._gone = True
            return self.sock


class Gate:
    """The admission of one service's connections (see the module's docstring)."""

    def __init__(
        self,
        service: str,
        limits: Limits,
        busy_line: Callable[[str, float], bytes],
        refused_line: Callable[[str], bytes],
        log: Callable[[str], None],
    ) -> None:
        self.service = service
        self.limits = limits
        self._busy_line = busy_line
        self._refused_line = refused_line
        self._log = log
        self._lock = threading.Lock()
        self._live: dict[int, tuple[Connection, threading.Thread]] = {}
        self._per_uid: Counter[int] = Counter()
        self._closing = False
        self._drainer = _Drainer(limits)
        self._logged_at = -1.0
        self._unlogged = 0

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._live)

    @property
    def draining(self) -> int:
        return self._drainer.count

    def admit(
        self,
        sock: socket.socket,
        allowed_uids: Collection[int],
        serve: Callable[[Connection], None],
    ) -> None:
        """Hand a connection just accepted to its worker, or answer it at once: never waits
        on the peer."""
        try:
            peer = peer_credentials(sock)
        except OSError:
            sock.close()
            return
        if peer.uid not in allowed_uids:
            self._note(f"refused pid={peer.pid} uid={peer.uid}: uid not allowed")
            self._turn_away(
                sock, self._refused_line(f"uid {peer.uid} may not use this {self.service}")
            )
            return
        sock.setblocking(True)
        conn = Connection(sock, peer, self.limits)
        with self._lock:
            crowded = self._crowded(peer.uid)
            if crowded is None:
                thread = threading.Thread(
                    target=self._work, args=(conn, serve), name=f"vibesys-{self.service}-conn"
                )
                thread.daemon = True  # a stuck peer never holds up the process's exit
                self._live[id(conn)] = (conn, thread)
                self._per_uid[peer.uid] += 1
        if crowded is not None:
            self._note(f"turned away pid={peer.pid} uid={peer.uid}: {crowded}")
            retry = self.limits.retry_after
            self._turn_away(
                sock, self._busy_line(f"the {self.service} is {crowded}; try again", retry)
            )
            return
        thread.start()

    def _note(self, line: str) -> None:
        """Log what the accept loop turns away, at most once a second (with how many were
        not logged): a peer connecting in a loop cannot flood the log, nor block on it."""
        now = time.monotonic()
        if now - self._logged_at < 1.0:
            self._unlogged += 1
            return
        more = f" (and {self._unlogged} more since the last such line)" if self._unlogged else ""
        self._logged_at, self._unlogged = now, 0
        self._log(line + more)

    def _crowded(self, uid: int) -> str | None:
        if self._closing:
            return "shutting down"
        if len(self._live) >= self.limits.max_connections:
            return f"busy ({self.limits.max_connections} connections open, its limit)"
        if self._per_uid[uid] >= self.limits.max_per_uid:
            return f"busy (uid {uid} has {self.limits.max_per_uid} connections open, its limit)"
        return None

    def _turn_away(self, sock: socket.socket, line: bytes) -> None:
        """A line of a few hundred bytes into a fresh socket's buffer: sent without blocking
        (if it does not fit, the peer gets nothing but the end)."""
        with contextlib.suppress(OSError):
            sock.setblocking(False)
            sock.send(line)
            sock.shutdown(socket.SHUT_WR)
        self._drainer.add(sock)

    def _work(self, conn: Connection, serve: Callable[[Connection], None]) -> None:
        try:
            serve(conn)
        except Exception as exc:  # a worker must never die silently
            self._log(f"connection failed: {type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._live.pop(id(conn), None)
                self._per_uid[conn.peer.uid] -= 1
                if self._per_uid[conn.peer.uid] <= 0:
                    del self._per_uid[conn.peer.uid]
            sock = conn.release()
            if sock is not None:
                if conn.finished:
                    self._drainer.add(sock)
                else:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                    sock.close()

    def close(self, grace: float) -> None:
        """No more connections; those still reading their request line are cut at once, the
        others get `grace` seconds to end, then their sockets are shut down too."""
        with self._lock:
            self._closing = True
            live = list(self._live.values())
            for conn, _ in live:
                conn.stop.set()
        for conn, _ in live:
            if conn.reading:
                conn.shutdown()
        _join([thread for _, thread in live], grace)
        for conn, _ in live:
            conn.shutdown()
        _join([thread for _, thread in live], 1.0)
        self._drainer.stop()


def _join(threads: list[threading.Thread], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    for thread in threads:
        thread.join(max(deadline - time.monotonic(), 0.0))


class _Drainer:
    """One thread reads and drops what answered connections still send, each at most
    `drain_bytes` within `drain_seconds` of its answer, then closes them."""

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._lock = threading.Lock()
        self._pending: list[tuple[socket.socket, float]] = []
        self._count = 0
        self._stopped = False
        self._thread: threading.Thread | None = None
        self._wake: tuple[socket.socket, socket.socket] | None = None

    @property
    def count(self) -> int:
        with self._lock:
            return self._count

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            take = not self._stopped and self._count < self._limits.max_draining
            if take:
                self._count += 1
                self._pending.append((sock, time.monotonic() + self._limits.drain_seconds))
                if self._thread is None:
                    self._wake = socket.socketpair()
                    self._wake[1].setblocking(False)  # a wake already pending is enough
                    self._thread = threading.Thread(
                        target=self._run, name="vibesys-drain", daemon=True
                    )
                    self._thread.start()
                wake = self._wake
        if not take:
            sock.close()
            return
        assert wake is not None
        with contextlib.suppress(OSError):
            wake[1].send(b"\0")

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            thread, wake = self._thread, self._wake
        if thread is None or wake is None:
            return
        with contextlib.suppress(OSError):
            wake[1].send(b"\0")
        thread.join(1.0)

    def _run(self) -> None:
        assert self._wake is not None
        waker, signaller = self._wake
        waker.setblocking(False)
        selector = selectors.DefaultSelector()
        selector.register(waker, selectors.EVENT_READ, None)
        budgets: dict[socket.socket, list[float]] = {}  # socket -> [deadline, bytes left]
        try:
            while True:
                with self._lock:
                    stopped, fresh, self._pending = self._stopped, self._pending, []
                if stopped:
                    for sock, _ in fresh:
                        sock.close()
                    return
                for sock, deadline in fresh:
                    sock.setblocking(False)
                    budgets[sock] = [deadline, float(self._limits.drain_bytes)]
                    selector.register(sock, selectors.EVENT_READ, sock)
                now = time.monotonic()
                first = min((b[0] for b in budgets.values()), default=now + 60.0)
                for key, _ in selector.select(max(first - now, 0.0)):
                    if key.data is None:  # the waker: something to add, or stop
                        with contextlib.suppress(OSError):
                            waker.recv(4096)
                        continue
                    sock = key.data
                    budget = budgets[sock]
                    try:
                        data = sock.recv(min(65536, int(budget[1])))
                    except BlockingIOError:
                        continue
                    except OSError:
                        data = b""
                    budget[1] -= len(data)
                    if not data or budget[1] <= 0:
                        self._finish(selector, budgets, sock)
                now = time.monotonic()
                for sock in [s for s, b in budgets.items() if b[0] <= now]:
                    self._finish(selector, budgets, sock)
        finally:
            for sock in list(budgets):
                self._finish(selector, budgets, sock)
            selector.close()
            waker.close()
            signaller.close()

    def _finish(
        self,
        selector: selectors.BaseSelector,
        budgets: dict[socket.socket, list[float]],
        sock: socket.socket,
    ) -> None:
        selector.unregister(sock)
        del budgets[sock]
        sock.close()
        with self._lock:
            self._count -= 1
