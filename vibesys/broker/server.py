"""The broker's socket: one thread per connection, each serving exactly one GPU command.

The socket's course is the service layer's (`vibesys.service`, the bridge's too): peer
credentials (SO_PEERCRED) are
checked against the allowed uids, the connections are capped (all of them, and one uid's
share), the accept loop never waits on a peer, and the request line is due within an absolute
deadline from the accept. The line is decoded, its token compared in constant time, and
admitted (workspace, limits, environment) or refused with the reason. An accepted command
waits for a slot under the run's cap, runs through the `GpuJobRunner`, and its exit status is
the last line. From the moment it is accepted a watcher reads the connection: end of file or
an error means the client is gone, and the command is stopped, whether it is still waiting
(nothing is submitted) or running (the job is cancelled). Beside the serving, from its start,
the jobs the run's dead brokers left are carried on (`Slots.carry_on`).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Final, Protocol

import msgspec

from vibesys.broker.admission import Admission, Refusal
from vibesys.broker.jobs import GpuJob, GpuJobRunner, StopSignal, Stream
from vibesys.broker.protocol import MAX_CALL_BYTES, decode_call
from vibesys.broker.replies import (
    Capture,
    Captured,
    Exit,
    Output,
    Refused,
    Reply,
    Waiting,
    encode_reply,
)
from vibesys.broker.slots import Held
from vibesys.service.connections import Connection, Gate, Limits
from vibesys.service.server import ReplySink, SocketService, StopFlag

__all__ = ["BrokerServer", "Slots"]

#: Output is cut into replies of at most this many bytes (before base64).
OUTPUT_CHUNK: Final = 48 * 1024
#: How long a shutdown waits for the stopped commands to settle before it cuts their sockets.
SHUTDOWN_SECONDS: Final = 120.0
#: How long a shutdown waits for the carrying on of dead brokers' jobs to stop (it was told to).
CARRY_ON_JOIN_SECONDS: Final = 30.0


class Slots(Protocol):
    """The run's cap: one broker's (`slots.JobSlots`) or the whole run's (`RunSlots`)."""

    @property
    def waiting(self) -> int: ...

    def carry_on(self, stop: StopSignal) -> None: ...

    def slot(
        self, stop: StopSignal, on_wait: Callable[[Waiting], None]
    ) -> AbstractContextManager[Held]: ...


def _log_to_stderr(line: str) -> None:
    print(f"vibesys broker: {line}", file=sys.stderr, flush=True)


def _refused_line(message: str, _field: str | None) -> bytes:
    return encode_reply(Refused(message))


def _busy_line(message: str, _retry_after: float) -> bytes:
    return encode_reply(Refused(message))  # vibesys-gpu says why and exits 2


class BrokerServer:
    """The broker's one operation (run a GPU command) on its socket service."""

    def __init__(
        self,
        admission: Admission,
        runner: GpuJobRunner,
        slots: Slots,
        socket_path: Path,
        allowed_uids: frozenset[int],
        log: Callable[[str], None] = _log_to_stderr,
        limits: Limits | None = None,
    ) -> None:
        self.admission = admission
        self.runner = runner
        self.slots = slots
        self.socket_path = socket_path
        self.log = log
        self.socket = SocketService(
            "broker",
            socket_path,
            allowed_uids,
            limits or Limits(),
            _busy_line,
            _refused_line,
            log,
        )
        self.gate: Gate = self.socket.gate
        self._ending = threading.Event()
        # Dead brokers' jobs are carried on beside the serving, never before it.
        self._carrying = threading.Thread(
            target=self._carry_on, name="vibesys-gpu-carry-on", daemon=True
        )

    def listen(self) -> None:
        """Bind the socket (owner-only) in its directory, which the caller made private."""
        self.socket.listen()

    def serve_forever(self, stop: StopFlag) -> None:
        """Accept until `stop` is set, then stop every command and wait for them to settle.
        Meanwhile the jobs the run's dead brokers left are carried on (`Slots.carry_on`)."""
        self._carrying.start()
        try:
            self.socket.accept_until(stop, self._serve)
        finally:
            self.shutdown()

    def shutdown(self, grace_seconds: float = SHUTDOWN_SECONDS) -> None:
        """Stop every command; connections still sending their request are cut at once, the
        commands get `grace_seconds` to settle, then their sockets are cut too."""
        self._ending.set()
        self.socket.close(grace_seconds)
        if self._carrying.is_alive():
            self._carrying.join(CARRY_ON_JOIN_SECONDS)

    def _carry_on(self) -> None:
        try:
            self.slots.carry_on(self._ending)
        except Exception as exc:  # the next broker or `vibesys reconcile` carries them on
            self.log(f"carrying on the run's dead brokers' jobs failed: {exc}")

    # -- one connection ---------------------------------------------------------------------

    def _serve(self, conn: Connection) -> None:
        job = self.socket.read_call(conn, MAX_CALL_BYTES, lambda line: self._admit(line, conn))
        if job is None:
            return
        peer = conn.peer
        self.log(
            f"accepted pid={peer.pid} uid={peer.uid} cwd={job.cwd} gpus={job.gpus} "
            f"time={job.time_minutes} profiler={job.profiler} argv={list(job.argv)!r}"
        )
        # The connection's stop: set by a shutdown, by the client leaving, by a failed send.
        sink = _Sink(conn.sock, encode_reply, conn.stop)
        sink.watch()
        with self.slots.slot(conn.stop, sink.send) as held:
            if not held:
                self.log(f"pid={peer.pid}: stopped while waiting; nothing was submitted")
                return
            status = self.runner.run(msgspec.structs.replace(job, slot=held), sink, conn.stop)
        self.log(f"pid={peer.pid}: exit status {status}")
        sink.send(Exit(status))

    def _admit(self, line: bytes, conn: Connection) -> GpuJob:
        call = decode_call(line)
        if conn.stop.is_set():
            raise Refusal("the broker is shutting down; try again")
        return self.admission.admit(call)


class _Sink(ReplySink[Reply]):
    """The command's output and captures, cut into replies of at most `OUTPUT_CHUNK` bytes."""

    def write(self, stream: Stream, data: bytes) -> None:
        for start in range(0, len(data), OUTPUT_CHUNK):
            self.send(Output(stream, data[start : start + OUTPUT_CHUNK]))

    def capture(self, name: str, data: bytes) -> None:
        for start in range(0, len(data), OUTPUT_CHUNK):
            self.send(Capture(name, data[start : start + OUTPUT_CHUNK]))

    def captured(self, name: str, size: int, sha256: str) -> None:
        self.send(Captured(name, size, sha256))
