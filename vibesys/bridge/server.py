"""The bridge's socket: one thread per connection, each serving one request.

A connection's life: peer credentials (SO_PEERCRED) are read and checked against the allowed
uids; one request line is read (bounded in size and time; a line cut short by the end of the
connection is refused as truncated); it is decoded and admitted, or refused naming the field.
An evaluation is then followed until it ends: the helper gets the replies as they happen and
the result last. A helper that goes away stops only its own following: the evaluation goes on,
and the same request id reattaches to it. Only a `cancel` request (the helper interrupted)
cancels it.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from vibesys.bridge.admission import Refusal, SessionPolicy
from vibesys.bridge.follow import Follower
from vibesys.bridge.protocol import (
    MAX_REQUEST_BYTES,
    LineDecoder,
    ProtocolError,
    Request,
    decode_request,
    refusal_field,
)
from vibesys.bridge.replies import (
    Accepted,
    Cancelling,
    Capabilities,
    Refused,
    Reply,
    Result,
    Stopping,
    encode_reply,
)
from vibesys.bridge.runner import EvaluationRunner, Handle
from vibesys.broker.jobs import StopSignal
from vibesys.broker.server import PeerCredentials, peer_credentials
from vibesys.job_result import JobResult, exit_status_of
from vibesys.journal_schema import open_journal
from vibesys.osutil.private_dir import listen_private

__all__ = ["BridgeServer", "PeerCredentials"]

#: How long a helper may take to send its request line.
REQUEST_SECONDS: Final = 10.0
#: How long one reply may take to reach a helper that stopped reading.
SEND_SECONDS: Final = 30
#: How often a follower looks at the journal and the spool.
FOLLOW_SECONDS: Final = 0.1
MAX_CONNECTIONS: Final = 64


class Truncated(ProtocolError):
    """The connection ended inside the request line."""


def _log_to_stderr(line: str) -> None:
    print(f"vibesys bridge: {line}", file=sys.stderr, flush=True)


@dataclass
class BridgeServer:
    policy: SessionPolicy
    runner: EvaluationRunner
    socket_path: Path
    allowed_uids: frozenset[int]
    capabilities: dict[str, Any]
    log: Callable[[str], None] = _log_to_stderr
    _listener: socket.socket | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)
    _closing: threading.Event = field(default_factory=threading.Event)
    #: set when teardown gives up waiting: followers send what they have and leave
    _abandon: threading.Event = field(default_factory=threading.Event)

    def listen(self) -> None:
        """Bind the socket (owner-only) in its directory, which the caller made private and
        whose stale socket the caller found dead (`setup.claim_socket`)."""
        listener = listen_private(self.socket_path, 16)
        listener.settimeout(0.2)
        self._listener = listener

    def serve(self, stop: StopSignal) -> None:
        """Accept connections until `stop` is set (the caller then runs `close`)."""
        assert self._listener is not None, "listen() first"
        while not stop.is_set() and not self._closing.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # the listener was closed under us: teardown
            self._start(conn)

    def stop_listening(self) -> None:
        """No new connections (the socket file goes); the connections served go on."""
        self._closing.set()
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()

    def close(self, grace_seconds: float = 5.0) -> None:
        """After the runner's teardown: let every follower send its last replies, then go."""
        self.stop_listening()
        self._abandon.set()
        with self._lock:
            threads = list(self._threads)
        deadline = time.monotonic() + grace_seconds
        for thread in threads:
            thread.join(max(deadline - time.monotonic(), 0.0))

    # -- one connection ---------------------------------------------------------------------

    def _start(self, conn: socket.socket) -> None:
        conn.setblocking(True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            crowded = len(self._threads) >= MAX_CONNECTIONS
            if not crowded:
                thread = threading.Thread(
                    target=self._serve, args=(conn,), name="vibesys-eval-conn", daemon=True
                )
                self._threads.append(thread)
        if crowded:
            with conn:
                _send_quietly(conn, Refused("the bridge is busy; try again"))
            return
        thread.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            with conn:
                try:
                    self._serve_one(conn)
                finally:
                    # Wakes the watcher's recv (closing alone would not).
                    with contextlib.suppress(OSError):
                        conn.shutdown(socket.SHUT_RDWR)
        except Exception as exc:  # a thread must never die silently
            self.log(f"connection failed: {type(exc).__name__}: {exc}")

    def _serve_one(self, conn: socket.socket) -> None:
        peer = peer_credentials(conn)
        if peer.uid not in self.allowed_uids:
            self.log(f"refused pid={peer.pid} uid={peer.uid}: uid not allowed")
            _send_quietly(conn, Refused(f"uid {peer.uid} may not use this bridge"))
            return
        try:
            request = _read_request(conn)
            reply = self._answer(request, peer)
        except (ProtocolError, Refusal) as exc:
            name = exc.field if isinstance(exc, Refusal) else refusal_field(exc)
            self.log(f"refused pid={peer.pid} uid={peer.uid}: {exc}")
            _send_quietly(conn, Refused(str(exc), name))
            return
        except OSError:
            return  # gone (or too slow) before its request arrived
        except Exception as exc:  # a bug: say so, rather than leave the helper retrying
            self.log(f"pid={peer.pid}: failed: {type(exc).__name__}: {exc}")
            # Only the kind of failure to the peer: the text may hold what the request held.
            _send_quietly(conn, Refused(f"the bridge failed ({type(exc).__name__}); see its log"))
            return
        if isinstance(reply, tuple):
            self._follow(conn, *reply, request, peer)
        else:
            _send_quietly(conn, reply)

    def _answer(self, request: Request, peer: PeerCredentials) -> Reply | tuple[Handle, bool]:
        if request.op == "capabilities":
            self.policy.check_token(request.token)
            return Capabilities(self.capabilities)
        evaluation = self.policy.admit(request, peer.uid)
        if request.op == "cancel":
            by = f"vibesys-eval cancel (pid {peer.pid})"
            message = self.runner.cancel(evaluation.run_id, evaluation.request_id, peer.uid, by)
            self.log(f"pid={peer.pid}: {message}")
            return Cancelling(message)
        if self._closing.is_set():
            raise Refusal("the session is shutting down; no new evaluations")
        handle, known = self.runner.start(evaluation)
        self.log(
            f"{'reattached' if known else 'accepted'} pid={peer.pid} uid={peer.uid} "
            f"request={evaluation.request_id} invocation={handle.invocation_id} "
            f"argv={list(evaluation.argv)!r}"
        )
        return handle, known

    def _follow(
        self,
        conn: socket.socket,
        handle: Handle,
        known: bool,
        request: Request,
        peer: PeerCredentials,
    ) -> None:
        sink = _Sink(conn)
        threading.Thread(target=sink.watch, daemon=True).start()
        sink.send(Accepted(handle.invocation_id, request.request_id, known))
        journal = open_journal(self.runner.journal_path, readonly=True)
        try:
            follower = Follower(
                journal,
                handle.invocation_id,
                request.run,
                self.runner.site.cluster,
                request.resume,
                sink.send,
            )
            told = False
            while not sink.broken:
                finished = handle.done.wait(FOLLOW_SECONDS)
                follower.step()
                if handle.stopping is not None and not told:
                    told = True
                    sink.send(Stopping(f"[vibesys-eval] {handle.stopping}"))
                if finished or self._abandon.is_set():
                    break
            if sink.broken:
                self.log(f"pid={peer.pid}: the helper left; {handle.invocation_id} goes on")
                return
            found = handle.result if handle.done.is_set() else None
            if found is None:
                found = self.runner.unsettled_result(handle)
            sink.send(_result_reply(found))
            self.log(f"pid={peer.pid}: {handle.invocation_id} {found.status}")
        finally:
            journal.close()


def _result_reply(found: JobResult) -> Result:
    return Result(found.model_dump(mode="json"), exit_status_of(found))


def _read_request(conn: socket.socket) -> Request:
    """One line, at most MAX_REQUEST_BYTES, within REQUEST_SECONDS."""
    decoder = LineDecoder(MAX_REQUEST_BYTES)
    deadline = time.monotonic() + REQUEST_SECONDS
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Truncated("request: no complete line within 10 s")
        conn.settimeout(left)
        data = conn.recv(65536)
        if not data:
            if decoder.pending():
                raise Truncated("request: truncated (the connection ended before its newline)")
            raise ConnectionResetError("closed before a request")
        lines = decoder.feed(data)
        if lines:
            conn.settimeout(None)
            conn.setsockopt(
                socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", SEND_SECONDS, 0)
            )
            return decode_request(lines[0])


def _send_quietly(conn: socket.socket, reply: Reply) -> None:
    """Send a last reply, then read what the peer still sends (briefly, dropped): closing a
    socket with unread bytes resets the connection, and the peer would lose the reply."""
    with contextlib.suppress(OSError):
        conn.sendall(encode_reply(reply))
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(1.0)
        drained = 0
        while drained < MAX_REQUEST_BYTES and (data := conn.recv(65536)):
            drained += len(data)


class _Sink:
    """Replies to one helper; a failed send means it is gone (its evaluation goes on)."""

    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn
        self.broken = False

    def send(self, reply: Reply) -> None:
        if self.broken:
            return
        try:
            self._conn.sendall(encode_reply(reply))
        except OSError:
            self.broken = True

    def watch(self) -> None:
        """The helper sends nothing after its request: an end of file (or an error) means it
        is gone. Whatever else arrives is read and dropped, never buffered."""
        try:
            while self._conn.recv(4096):
                pass
        except OSError:
            pass
        self.broken = True
