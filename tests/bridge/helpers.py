"""A bridge served in the test's process over a real Unix socket, on the local site (fast), and
a raw client that sends one line and reads every reply."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vibesys.bridge.admission import SessionPolicy
from vibesys.bridge.runner import EvaluationRunner
from vibesys.bridge.server import HEARTBEAT_SECONDS, BridgeServer
from vibesys.bridge.site import Site
from vibesys.config.resources import PortableResources
from vibesys.engine.drive import StopFlag
from vibesys.journal_schema import Journal, open_journal
from vibesys.service.connections import Limits
from vibesys.service.tokens import BRIDGE_PREFIX, new_token


@dataclass
class Bridge:
    server: BridgeServer
    runner: EvaluationRunner
    token: str
    workspace: Path
    journal_path: Path
    results: Path
    logs: list[str] = field(default_factory=list)

    @property
    def socket_path(self) -> Path:
        return self.server.socket_path

    def body(self, **changes: Any) -> dict[str, Any]:
        values: dict[str, Any] = {
            "version": 1,
            "op": "evaluate",
            "token": self.token,
            "request_id": "r-1",
            "run": "campaign-1",
            "workspace": str(self.workspace),
            "kind": "accuracy",
            "argv": ["sh", "-c", "echo out; echo err >&2"],
            "timeout_seconds": None,
        }
        values.update(changes)
        return values

    def talk(
        self, body: dict[str, Any] | bytes, *, half_close: bool = False
    ) -> list[dict[str, Any]]:
        return talk(self.socket_path, body, half_close=half_close)

    def journal(self) -> Journal:
        return open_journal(self.journal_path, readonly=True)

    def counts(self) -> tuple[int, int]:
        """(bridge request rows, invocations) in the journal."""
        store = self.journal()
        try:
            rows = store.conn.execute("SELECT count(*) FROM bridge_requests").fetchone()[0]
            return rows, len(store.invocations.all_ids())
        finally:
            store.close()


def talk(
    path: Path, body: dict[str, Any] | bytes, *, half_close: bool = False
) -> list[dict[str, Any]]:
    line = body if isinstance(body, bytes) else json.dumps(body).encode() + b"\n"
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(60)
    conn.connect(str(path))
    with conn:
        conn.sendall(line)
        if half_close:
            conn.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    return [json.loads(raw) for raw in data.splitlines()]


def final(replies: list[dict[str, Any]]) -> dict[str, Any]:
    assert replies, "no reply"
    return replies[-1]


def output(replies: list[dict[str, Any]], stream: str = "stdout") -> bytes:
    import base64

    return b"".join(
        base64.b64decode(r["data"])
        for r in replies
        if r["type"] == "output" and r["stream"] == stream
    )


def make_bridge(
    tmp_path: Path,
    workspace: Path,
    *,
    limits: Limits | None = None,
    heartbeat: float = HEARTBEAT_SECONDS,
    **policy: Any,
) -> tuple[Bridge, StopFlag]:
    journal_path = tmp_path / ".vibesys" / "journal.db"
    open_journal(journal_path).close()
    results = tmp_path / "results"
    results.mkdir()
    runner = EvaluationRunner(
        journal_path, Site("local", "local", PortableResources()), results, os.environ
    )
    token = new_token(BRIDGE_PREFIX)
    settings: dict[str, Any] = {
        "allowed_env": frozenset({"SEED"}),
        "default_timeout": 600,
        "max_timeout": 3600,
    }
    settings.update(policy)
    session = SessionPolicy(
        token, "campaign-1", str(workspace), os.path.realpath(workspace), **settings
    )
    sockets = tmp_path / "sock"
    sockets.mkdir(mode=0o700)
    logs: list[str] = []
    server = BridgeServer(
        session,
        runner,
        sockets / "eval.sock",
        frozenset({os.getuid()}),
        {"backend": "local"},
        log=logs.append,
        limits=limits or Limits(),
        heartbeat_seconds=heartbeat,
    )
    server.listen()
    stop = StopFlag()
    threading.Thread(target=server.serve, args=(stop,), daemon=True).start()
    return Bridge(server, runner, token, workspace, journal_path, results, logs), stop


def throwaway_uid() -> int:
    import grp
    import pwd

    taken = {u.pw_uid for u in pwd.getpwall()} | {g.gr_gid for g in grp.getgrall()}
    return next(n for n in range(61000, 65000) if n not in taken)


_AS_OTHER = """
import json, socket, sys
conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
conn.connect(sys.argv[1])
conn.sendall(sys.stdin.buffer.read())
data = b""
while chunk := conn.recv(65536):
    data += chunk
print(data.decode())
"""


def as_other(uid: int, path: Path, line: bytes) -> list[dict[str, Any]]:
    """Send `line` to the bridge as `uid` (a throwaway one, through setpriv); the replies."""
    argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    done = subprocess.run(
        [*argv, sys.executable, "-c", _AS_OTHER, str(path)],
        input=line,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(row) for row in done.stdout.decode().splitlines() if row.strip()]


class Tricklers:
    """`count` peers that connect, send `first` (a bad line, or a line without its end),
    then a byte each every `every` seconds, until the server ends them: a thread of their own
    trickles for all. `again`: a peer the server ended connects once more."""

    def __init__(
        self, path: Path, count: int, first: bytes, every: float = 0.2, again: bool = False
    ) -> None:
        self.path, self.first, self.every, self.again = path, first, every, again
        self.ended = 0
        self.answers: list[bytes] = []
        self._peers: list[socket.socket | None] = [self._connect() for _ in range(count)]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _connect(self) -> socket.socket:
        peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            peer.connect(str(self.path))
        except OSError:
            peer.close()
            raise
        peer.setblocking(False)
        with contextlib.suppress(OSError):
            peer.send(self.first)
        return peer

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            for index, peer in enumerate(self._peers):
                if peer is None:
                    continue
                try:
                    with contextlib.suppress(BlockingIOError):
                        if data := peer.recv(65536):
                            self.answers.append(data)
                    peer.send(b"x")
                except OSError:  # ended by the server
                    peer.close()
                    self.ended += 1
                    self._peers[index] = None
                    if self.again and not self._stop.is_set():
                        with contextlib.suppress(OSError):
                            self._peers[index] = self._connect()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for peer in self._peers:
            if peer is not None:
                peer.close()
