"""The broker's socket: one thread per connection, each serving exactly one GPU command.

Who may connect, how many at once and how long a peer may take are the connection admission
layer's (`vibesys.osutil.connections`, the bridge's too): peer credentials (SO_PEERCRED) are
checked against the allowed uids, the connections are capped (all of them, and one uid's
share), the accept loop never waits on a peer, and the request line is due within an absolute
deadline from the accept. The line is decoded, its token compared in constant time, and
admitted (workspace, limits, environment) or refused with the reason. An accepted command
waits for a slot under the run's cap, runs through the `GpuJobRunner`, and its exit status is
the last line. From the moment it is accepted a watcher reads the connection: end of file or
an error means the client is gone, and the command is stopped, whether it is still waiting
(nothing is submitted) or running (the job is cancelled).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from vibesys.broker.admission import Admission, Refusal
from vibesys.broker.jobs import GpuJobRunner, StopSignal, Stream
from vibesys.broker.protocol import (
    MAX_REQUEST_BYTES,
    Capture,
    Captured,
    Exit,
    LineDecoder,
    Output,
    ProtocolError,
    Refused,
    Reply,
    Waiting,
    decode_request,
    encode_reply,
)
from vibesys.broker.slots import Held
from vibesys.osutil.connections import Connection, Gate, IncompleteLine, Limits

__all__ = ["BrokerServer", "Slots"]

#: Output is cut into replies of at most this many bytes (before base64).
OUTPUT_CHUNK: Final = 48 * 1024
#: How long a shutdown waits for the stopped commands to settle before it cuts their sockets.
SHUTDOWN_SECONDS: Final = 120.0


class Slots(Protocol):
    """The run's cap: one broker's (`slots.JobSlots`) or the whole run's (`RunSlots`)."""

    @property
    def waiting(self) -> int: ...

    def slot(
        self, stop: StopSignal, on_wait: Callable[[Waiting], None]
    ) -> AbstractContextManager[Held]: ...


def _log_to_stderr(line: str) -> None:
    print(f"vibesys broker: {line}", file=sys.stderr, flush=True)


def _refused_line(message: str) -> bytes:
    return encode_reply(Refused(message))


def _busy_line(message: str, _retry_after: float) -> bytes:
    return encode_reply(Refused(message))  # vibesys-gpu says why and exits 2


@dataclass
class BrokerServer:
    admission: Admission
    runner: GpuJobRunner
    slots: Slots
    socket_path: Path
    allowed_uids: frozenset[int]
    log: Callable[[str], None] = _log_to_stderr
    limits: Limits = field(default_factory=Limits)
    gate: Gate = field(init=False)
    _listener: socket.socket | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    #: each command's stop flag, set by a shutdown
    _stops: dict[int, threading.Event] = field(default_factory=dict)
    _closing: bool = False

    def __post_init__(self) -> None:
        self.gate = Gate("broker", self.limits, _busy_line, _refused_line, self.log)

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
        """Accept until `stop` is set, then stop every command and wait for them to settle.
        Only accepts and hands off: it never waits on a peer."""
        assert self._listener is not None, "listen() first"
        try:
            while not stop.is_set() and self._listener is not None:
                try:
                    conn, _ = self._listener.accept()
                except TimeoutError:
                    continue
                except OSError:
                    return  # the listener was closed under us: a shutdown
                self.gate.admit(conn, self.allowed_uids, self._serve)
        finally:
            self.shutdown()

    def shutdown(self, grace_seconds: float = SHUTDOWN_SECONDS) -> None:
        """Stop every command; connections still sending their request are cut at once, the
        commands get `grace_seconds` to settle, then their sockets are cut too."""
        with self._lock:
            self._closing = True
            for flag in self._stops.values():
                flag.set()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()
        self.gate.close(grace_seconds)

    # -- one connection ---------------------------------------------------------------------

    def _serve(self, conn: Connection) -> None:
        stop = threading.Event()
        with self._lock:
            if self._closing:
                stop.set()
            self._stops[id(stop)] = stop
        try:
            self._serve_one(conn, stop)
        finally:
            with self._lock:
                self._stops.pop(id(stop), None)

    def _serve_one(self, conn: Connection, stop: threading.Event) -> None:
        peer = conn.peer
        try:
            request = decode_request(conn.read_line(LineDecoder(MAX_REQUEST_BYTES)))
            if stop.is_set():
                raise Refusal("the broker is shutting down; try again")
            job = self.admission.admit(request)
        except IncompleteLine as exc:
            self.log(f"refused pid={peer.pid} uid={peer.uid}: request: {exc}")
            conn.finish(encode_reply(Refused(f"request: {exc}")))
            return
        except (ProtocolError, Refusal) as exc:
            self.log(f"refused pid={peer.pid} uid={peer.uid}: {exc}")
            conn.finish(encode_reply(Refused(str(exc))))
            return
        except OSError:
            return  # gone before its request arrived (or cut by a shutdown)
        self.log(
            f"accepted pid={peer.pid} uid={peer.uid} cwd={job.cwd} gpus={job.gpus} "
            f"time={job.time_minutes} profiler={job.profiler} argv={list(job.argv)!r}"
        )
        sink = _Sink(conn.sock, stop)
        threading.Thread(target=_watch, args=(conn.sock, stop), daemon=True).start()
        with self.slots.slot(stop, sink.send) as held:
            if not held:
                self.log(f"pid={peer.pid}: stopped while waiting; nothing was submitted")
                return
            status = self.runner.run(dataclasses.replace(job, slot=held), sink, stop)
        self.log(f"pid={peer.pid}: exit status {status}")
        sink.send(Exit(status))


def _watch(conn: socket.socket, stop: threading.Event) -> None:
    """Set `stop` once the client's end closes. The client sends nothing after its request,
    so whatever arrives is read and dropped (never buffered)."""
    try:
        while conn.recv(4096):
            pass
    except OSError:
        pass
    stop.set()


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

    def capture(self, name: str, data: bytes) -> None:
        for start in range(0, len(data), OUTPUT_CHUNK):
            self.send(Capture(name, data[start : start + OUTPUT_CHUNK]))

    def captured(self, name: str, size: int, sha256: str) -> None:
        self.send(Captured(name, size, sha256))

    def send(self, reply: Reply) -> None:
        with self._lock:
            if self._broken:
                return
            try:
                self._conn.sendall(encode_reply(reply))
            except OSError:
                self._broken = True
                self._stop.set()
