"""The bridge's socket: one thread per connection, each serving one request.

Who may connect, how many at once and how long a peer may take are the connection admission
layer's (`vibesys.osutil.connections`, the GPU broker's too): the accept loop only hands off;
a connection past the caps (all of them, or one uid's share) is answered `busy`; the request
line is due within an absolute deadline from the accept, however its bytes trickle; a last
answer is drained by one thread, bounded in bytes and time. Then the request line is decoded
and admitted, or refused naming the field (a line cut short by the end of the connection is
refused as truncated). An evaluation is then followed until it ends: the helper gets the
replies as they happen, a heartbeat whenever nothing else came for `heartbeat_seconds`, and
the result last. A helper that goes away stops only its own following: the evaluation goes
on, and the same request id reattaches to it. Only a `cancel` request (the helper
interrupted) cancels it.
"""

from __future__ import annotations

import contextlib
import socket
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
    Busy,
    Cancelling,
    Capabilities,
    Heartbeat,
    Refused,
    Reply,
    Result,
    Stopping,
    encode_reply,
)
from vibesys.bridge.runner import EvaluationRunner, Handle
from vibesys.broker.jobs import StopSignal
from vibesys.job_result import JobResult, exit_status_of
from vibesys.journal_schema import open_journal
from vibesys.osutil.connections import (
    Connection,
    Gate,
    IncompleteLine,
    Limits,
    PeerCredentials,
)
from vibesys.osutil.private_dir import listen_private

__all__ = ["HEARTBEAT_SECONDS", "BridgeServer", "PeerCredentials"]

#: How often a follower looks at the journal and the spool.
FOLLOW_SECONDS: Final = 0.1
#: A heartbeat goes to the helper whenever nothing else did for this long.
HEARTBEAT_SECONDS: Final = 5.0


def _log_to_stderr(line: str) -> None:
    print(f"vibesys bridge: {line}", file=sys.stderr, flush=True)


def _busy_line(message: str, retry_after: float) -> bytes:
    return encode_reply(Busy(message, retry_after))


def _refused_line(message: str) -> bytes:
    return encode_reply(Refused(message))


@dataclass
class BridgeServer:
    policy: SessionPolicy
    runner: EvaluationRunner
    socket_path: Path
    allowed_uids: frozenset[int]
    capabilities: dict[str, Any]
    #: the agent's runtime notes (Markdown), rendered from the capabilities when the session
    #: started; None: this bridge has none to give
    notes: str | None = None
    log: Callable[[str], None] = _log_to_stderr
    limits: Limits = field(default_factory=Limits)
    heartbeat_seconds: float = HEARTBEAT_SECONDS
    gate: Gate = field(init=False)
    _listener: socket.socket | None = None
    _closing: threading.Event = field(default_factory=threading.Event)
    #: set when teardown gives up waiting: followers send what they have and leave
    _abandon: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.gate = Gate("bridge", self.limits, _busy_line, _refused_line, self.log)

    def listen(self) -> None:
        """Bind the socket (owner-only) in its directory, which the caller made private and
        whose stale socket the caller found dead (`setup.claim_socket`)."""
        listener = listen_private(self.socket_path, 16)
        listener.settimeout(0.2)
        self._listener = listener

    def serve(self, stop: StopSignal) -> None:
        """Accept connections until `stop` is set (the caller then runs `close`). Only
        accepts and hands off: it never waits on a peer."""
        assert self._listener is not None, "listen() first"
        while not stop.is_set() and not self._closing.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # the listener was closed under us: teardown
            self.gate.admit(conn, self.allowed_uids, self._serve)

    def stop_listening(self) -> None:
        """No new connections (the socket file goes); the connections served go on."""
        self._closing.set()
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()

    def close(self, grace_seconds: float = 5.0) -> None:
        """After the runner's teardown: let every follower send its last replies, then cut
        every connection still open (within `grace_seconds` and a second)."""
        self.stop_listening()
        self._abandon.set()
        self.gate.close(grace_seconds)

    # -- one connection ---------------------------------------------------------------------

    def _serve(self, conn: Connection) -> None:
        peer = conn.peer
        try:
            request = decode_request(conn.read_line(LineDecoder(MAX_REQUEST_BYTES)))
            reply = self._answer(request, peer)
        except IncompleteLine as exc:
            self.log(f"refused pid={peer.pid} uid={peer.uid}: request: {exc}")
            conn.finish(encode_reply(Refused(f"request: {exc}")))
            return
        except (ProtocolError, Refusal) as exc:
            name = exc.field if isinstance(exc, Refusal) else refusal_field(exc)
            self.log(f"refused pid={peer.pid} uid={peer.uid}: {exc}")
            conn.finish(encode_reply(Refused(str(exc), name)))
            return
        except OSError:
            return  # gone before its request arrived (or cut by teardown)
        except Exception as exc:  # a bug: say so, rather than leave the helper retrying
            self.log(f"pid={peer.pid}: failed: {type(exc).__name__}: {exc}")
            # Only the kind of failure to the peer: the text may hold what the request held.
            failed = Refused(f"the bridge failed ({type(exc).__name__}); see its log")
            conn.finish(encode_reply(failed))
            return
        if isinstance(reply, tuple):
            self._follow(conn.sock, *reply, request, peer)
        else:
            conn.finish(encode_reply(reply))

    def _answer(self, request: Request, peer: PeerCredentials) -> Reply | tuple[Handle, bool]:
        if request.op == "capabilities":
            self.policy.check_token(request.token)
            return Capabilities(self.capabilities, self.notes)
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
        sink.send(Accepted(handle.invocation_id, request.request_id, known, self.heartbeat_seconds))
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
                if time.monotonic() - sink.last_sent >= self.heartbeat_seconds:
                    sink.send(Heartbeat())  # the helper's sign that its bridge is there
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


class _Sink:
    """Replies to one helper; a failed send means it is gone (its evaluation goes on)."""

    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn
        self.broken = False
        self.last_sent = time.monotonic()

    def send(self, reply: Reply) -> None:
        if self.broken:
            return
        try:
            self._conn.sendall(encode_reply(reply))
        except OSError:
            self.broken = True
        self.last_sent = time.monotonic()

    def watch(self) -> None:
        """The helper sends nothing after its request: an end of file (or an error) means it
        is gone. Whatever else arrives is read and dropped, never buffered."""
        try:
            while self._conn.recv(4096):
                pass
        except OSError:
            pass
        self.broken = True
