"""The broker's socket: one thread per connection, each serving exactly one GPU command.

A connection's life: peer credentials (SO_PEERCRED) are read and checked against the allowed
uids; one request line is read (bounded in size and time); it is decoded, its token compared
in constant time, and admitted (workspace, limits, environment) or refused with the reason.
An accepted command waits for a slot under the run's cap, runs through the `GpuJobRunner`,
and its exit status is the last line. From the moment it is accepted a watcher reads the
connection: end of file or an error means the client is gone, and the command is stopped,
whether it is still waiting (nothing is submitted) or running (the job is cancelled).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from vibesys.broker.admission import Admission, Refusal
from vibesys.broker.jobs import GpuJobRunner, StopSignal, Stream
from vibesys.broker.protocol import (
    MAX_REQUEST_BYTES,
    Exit,
    LineDecoder,
    Output,
    ProtocolError,
    Refused,
    Reply,
    Request,
    Waiting,
    decode_request,
    encode_reply,
)
from vibesys.broker.slots import Held

__all__ = ["BrokerServer", "PeerCredentials", "Slots", "peer_credentials"]

#: How long a client may take to send its request line.
REQUEST_SECONDS: Final = 10.0
#: How long one reply may take to reach a client that stopped reading.
SEND_SECONDS: Final = 30
#: Output is cut into replies of at most this many bytes (before base64).
OUTPUT_CHUNK: Final = 48 * 1024
#: Connections served at once; more are refused at once (a run has a handful of agents).
MAX_CONNECTIONS: Final = 64


class Slots(Protocol):
    """The run's cap: one broker's (`slots.JobSlots`) or the whole run's (`RunSlots`)."""

    @property
    def waiting(self) -> int: ...

    def slot(
        self, stop: StopSignal, on_wait: Callable[[Waiting], None]
    ) -> AbstractContextManager[Held]: ...


@dataclass(frozen=True, slots=True)
class PeerCredentials:
    pid: int
    uid: int
    gid: int


def peer_credentials(conn: socket.socket) -> PeerCredentials:
    """The connecting process, as the kernel recorded it at connect()."""
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return PeerCredentials(pid, uid, gid)


def _log_to_stderr(line: str) -> None:
    print(f"vibesys broker: {line}", file=sys.stderr, flush=True)


@dataclass
class BrokerServer:
    admission: Admission
    runner: GpuJobRunner
    slots: Slots
    socket_path: Path
    allowed_uids: frozenset[int]
    log: Callable[[str], None] = _log_to_stderr
    max_connections: int = MAX_CONNECTIONS
    _listener: socket.socket | None = None
    _closing: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _connections: dict[int, threading.Event] = field(default_factory=dict)
    _threads: list[threading.Thread] = field(default_factory=list)

    def listen(self) -> None:
        """Bind the socket (owner-only) in its directory, which the caller made private."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        previous = os.umask(0o177)
        try:
            listener.bind(str(self.socket_path))
        finally:
            os.umask(previous)
        os.chmod(self.socket_path, 0o600)
        listener.listen(16)
        listener.settimeout(0.2)
        self._listener = listener

    def serve_forever(self, stop: threading.Event) -> None:
        """Accept until `stop` is set, then stop every command and wait for them to settle."""
        assert self._listener is not None, "listen() first"
        try:
            while not stop.is_set():
                try:
                    conn, _ = self._listener.accept()
                except TimeoutError:
                    continue
                self._start(conn)
        finally:
            self.shutdown()

    def shutdown(self) -> None:
        self._closing.set()
        with self._lock:
            for flag in self._connections.values():
                flag.set()
            threads = list(self._threads)
        for thread in threads:
            thread.join()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()

    # -- one connection ---------------------------------------------------------------------

    def _start(self, conn: socket.socket) -> None:
        conn.setblocking(True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            crowded = len(self._connections) >= self.max_connections or self._closing.is_set()
            stop = threading.Event()
            if not crowded:
                self._connections[id(stop)] = stop
        if crowded:
            with conn:
                _send_quietly(conn, Refused("the broker is busy or shutting down; try again"))
            return
        thread = threading.Thread(
            target=self._serve, args=(conn, stop), name="vibesys-gpu-conn", daemon=True
        )
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _serve(self, conn: socket.socket, stop: threading.Event) -> None:
        try:
            with conn:
                try:
                    self._serve_one(conn, stop)
                finally:
                    # Wakes the watcher's recv (closing alone would not).
                    with contextlib.suppress(OSError):
                        conn.shutdown(socket.SHUT_RDWR)
        except Exception as exc:  # a thread must never die silently
            self.log(f"connection failed: {type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._connections.pop(id(stop), None)

    def _serve_one(self, conn: socket.socket, stop: threading.Event) -> None:
        peer = peer_credentials(conn)
        if peer.uid not in self.allowed_uids:
            self.log(f"refused pid={peer.pid} uid={peer.uid}: uid not allowed")
            _send_quietly(conn, Refused(f"uid {peer.uid} may not use this broker"))
            return
        try:
            request = _read_request(conn)
            job = self.admission.admit(request)
        except (ProtocolError, Refusal) as exc:
            self.log(f"refused pid={peer.pid} uid={peer.uid}: {exc}")
            _send_quietly(conn, Refused(str(exc)))
            return
        except OSError:
            return  # gone (or too slow) before its request arrived
        self.log(
            f"accepted pid={peer.pid} uid={peer.uid} cwd={job.cwd} gpus={job.gpus} "
            f"time={job.time_minutes} argv={list(job.argv)!r}"
        )
        sink = _Sink(conn, stop)
        threading.Thread(target=_watch, args=(conn, stop), daemon=True).start()
        with self.slots.slot(stop, sink.send) as held:
            if not held:
                self.log(f"pid={peer.pid}: stopped while waiting; nothing was submitted")
                return
            status = self.runner.run(dataclasses.replace(job, slot=held), sink, stop)
        self.log(f"pid={peer.pid}: exit status {status}")
        sink.send(Exit(status))


def _read_request(conn: socket.socket) -> Request:
    """One line, at most MAX_REQUEST_BYTES, within REQUEST_SECONDS."""
    decoder = LineDecoder(MAX_REQUEST_BYTES)
    deadline = time.monotonic() + REQUEST_SECONDS
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no request in time")
        conn.settimeout(left)
        data = conn.recv(65536)
        if not data:
            raise ConnectionResetError("closed before a request")
        lines = decoder.feed(data)
        if lines:
            conn.settimeout(None)
            # A send may block this long on a client that stopped reading; then it is gone.
            conn.setsockopt(
                socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", SEND_SECONDS, 0)
            )
            return decode_request(lines[0])


def _watch(conn: socket.socket, stop: threading.Event) -> None:
    """Set `stop` once the client's end closes. The client sends nothing after its request,
    so whatever arrives is read and dropped (never buffered)."""
    try:
        while conn.recv(4096):
            pass
    except OSError:
        pass
    stop.set()


def _send_quietly(conn: socket.socket, reply: Reply) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(encode_reply(reply))


class _Sink:
    """Replies to one client; a failed send means the client is gone: the command stops."""

    def __init__(self, conn: socket.socket, stop: threading.Event) -> None:
        self._conn = conn
        self._stop = stop
        self._lock = threading.Lock()
        self._broken = False

    def write(self, stream: Stream, data: bytes) -> None:
        for start in range(0, len(data), OUTPUT_CHUNK):
            self.send(Output(stream, data[start : start + OUTPUT_CHUNK]))

    def send(self, reply: Reply) -> None:
        with self._lock:
            if self._broken:
                return
            try:
                self._conn.sendall(encode_reply(reply))
            except OSError:
                self._broken = True
                self._stop.set()
