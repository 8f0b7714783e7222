"""A bridge served in the test's process over a real Unix socket, on the local site (fast), and
a raw client that sends one line and reads every reply."""

from __future__ import annotations

import json
import os
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vibesys.bridge.admission import SessionPolicy
from vibesys.bridge.runner import EvaluationRunner
from vibesys.bridge.server import BridgeServer
from vibesys.bridge.site import Site
from vibesys.config import PortableResources
from vibesys.engine.drive import StopFlag
from vibesys.journal_schema import Journal, open_journal
from vibesys.osutil.tokens import BRIDGE_PREFIX, new_token


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
            return rows, len(store.all_ids())
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


def make_bridge(tmp_path: Path, workspace: Path, **policy: Any) -> tuple[Bridge, StopFlag]:
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
    )
    server.listen()
    stop = StopFlag()
    threading.Thread(target=server.serve, args=(stop,), daemon=True).start()
    return Bridge(server, runner, token, workspace, journal_path, results, logs), stop
