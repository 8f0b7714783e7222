"""The bridge's socket: one thread per connection, each serving one request.

The socket's course is the service layer's (`vibesys.service`, the GPU broker's too): the
accept loop only hands off;
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

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from vibesys.bridge.admission import Refusal, SessionPolicy
from vibesys.bridge.follow import Follower
from vibesys.bridge.protocol import MAX_CALL_BYTES, BridgeCall, decode_call
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
from vibesys.job_result import JobResult, exit_status_of
from vibesys.journal_schema import open_journal
from vibesys.service.connections import Connection, Gate, Limits, PeerCredentials
from vibesys.service.server import ReplySink, SocketService, StopFlag

__all__ = ["HEARTBEAT_SECONDS", "BridgeServer", "PeerCredentials"]

#: How often a follower looks at the journal and the spool.
FOLLOW_SECONDS: Final = 0.1
#: A heartbeat goes to the helper whenever nothing else did for this long.
HEARTBEAT_SECONDS: Final = 5.0


def _log_to_stderr(line: str) -> None:
    print(f"vibesys bridge: {line}", file=sys.stderr, flush=True)


def _busy_line(message: str, retry_after: float) -> bytes:
    return encode_reply(Busy(message, retry_after))


def _refused_line(message: str, field: str | None) -> bytes:
    return encode_reply(Refused(message, field))


class BridgeServer:
    """The bridge's operations (capabilities, evaluate, cancel) on its socket service."""

    def __init__(
        self,
        policy: SessionPolicy,
        runner: EvaluationRunner,
        socket_path: Path,
        allowed_uids: frozenset[int],
        capabilities: dict[str, Any],
        notes: str | None = None,
        log: Callable[[str], None] = _log_to_stderr,
        limits: Limits | None = None,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
    ) -> None:
        self.policy = policy
        self.runner = runner
        self.socket_path = socket_path
        self.capabilities = capabilities
        #: the agent's runtime notes (Markdown), rendered from the capabilities when the
        #: session started; None: this bridge has none to give
        self.notes = notes
        self.log = log
        self.heartbeat_seconds = heartbeat_seconds
        self.socket = SocketService(
            "bridge",
            socket_path,
            allowed_uids,
            limits or Limits(),
            _busy_line,
            _refused_line,
            log,
        )
        self.gate: Gate = self.socket.gate

    def listen(self) -> None:
        """Bind the socket (owner-only) in its directory, which the caller made private and
        whose stale socket the caller found dead (`setup.claim_socket`)."""
        self.socket.listen()

    def serve(self, stop: StopFlag) -> None:
        """Accept connections until `stop` is set (the caller then runs `close`)."""
        self.socket.accept_until(stop, self._serve)

    def stop_listening(self) -> None:
        """No new connections (the socket file goes); the connections served go on."""
        self.socket.stop_listening()

    def close(self, grace_seconds: float = 5.0) -> None:
        """After the runner's teardown: let every follower send its last replies, then cut
        every connection still open (within `grace_seconds` and a second)."""
        self.socket.close(grace_seconds)

    # -- one connection ---------------------------------------------------------------------

    def _serve(self, conn: Connection) -> None:
        peer = conn.peer
        answered = self.socket.read_call(
            conn, MAX_CALL_BYTES, lambda line: self._answer(decode_call(line), peer)
        )
        if answered is None:
            return
        call, reply = answered
        if isinstance(reply, tuple):
            self._follow(conn, *reply, call)
        else:
            conn.finish(encode_reply(reply))

    def _answer(
        self, call: BridgeCall, peer: PeerCredentials
    ) -> tuple[BridgeCall, Reply | tuple[Handle, bool]]:
        if call.op == "capabilities":
            self.policy.check_token(call.token)
            return call, Capabilities(self.capabilities, self.notes)
        evaluation = self.policy.admit(call, peer.uid)
        if call.op == "cancel":
            by = f"vibesys-eval cancel (pid {peer.pid})"
            message = self.runner.cancel(evaluation.run_id, evaluation.request_id, peer.uid, by)
            self.log(f"pid={peer.pid}: {message}")
            return call, Cancelling(message)
        if self.socket.closing:
            raise Refusal("the session is shutting down; no new evaluations")
        handle, known = self.runner.start(evaluation)
        self.log(
            f"{'reattached' if known else 'accepted'} pid={peer.pid} uid={peer.uid} "
            f"request={evaluation.request_id} invocation={handle.invocation_id} "
            f"argv={list(evaluation.argv)!r}"
        )
        return call, (handle, known)

    def _follow(self, conn: Connection, handle: Handle, known: bool, call: BridgeCall) -> None:
        """The evaluation's replies as they happen, until its result; a helper that leaves
        stops only its own following (the evaluation goes on). A teardown (`conn.stop`)
        makes the follower send what it has and the result as it stands."""
        peer = conn.peer
        sink: ReplySink[Reply] = ReplySink(conn.sock, encode_reply, threading.Event())
        sink.watch()
        sink.send(Accepted(handle.invocation_id, call.request_id, known, self.heartbeat_seconds))
        journal = open_journal(self.runner.journal_path, readonly=True)
        try:
            follower = Follower(
                journal,
                handle.invocation_id,
                call.run,
                self.runner.site.cluster,
                call.resume,
                sink.send,
            )
            told = False
            while not sink.gone.is_set():
                finished = handle.done.wait(FOLLOW_SECONDS)
                follower.step()
                if handle.stopping is not None and not told:
                    told = True
                    sink.send(Stopping(f"[vibesys-eval] {handle.stopping}"))
                sink.heartbeat(Heartbeat(), self.heartbeat_seconds)
                if finished or conn.stop.is_set():
                    break
            if sink.gone.is_set():
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
