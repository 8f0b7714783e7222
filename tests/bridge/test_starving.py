"""The bridge cannot be starved (real sockets, a real `vibesys-eval`, the limits shrunk): a
request line's deadline is absolute, however its bytes trickle; a refused peer is drained a
bounded number of bytes within a bounded time, off the accept loop, which answers at once
while peers trickle; connections are capped per uid; `busy` is retried within
--retry-seconds; a helper whose bridge is stopped notices the missing heartbeats and
reconnects, or gives up with 255, and never hangs."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.bridge.helpers import (
    Bridge,
    Tricklers,
    as_other,
    make_bridge,
    talk,
    throwaway_uid,
)
from tests.helpers.hang_guard import wait_until
from vibesys.bridge import client
from vibesys.service.connections import Limits

CLIENT = Path(client.__file__)
REPO = Path(__file__).resolve().parents[2]
#: what a peer sends that would be a secret if the bridge echoed it back
SECRET = b'{"version": 1, "token": "vbeval1.not-to-be-echoed'


@contextlib.contextmanager
def served(root: Path, workspace: Path, **limits: Any) -> Iterator[Bridge]:
    root.mkdir(exist_ok=True)
    bridge, stop = make_bridge(root, workspace, limits=Limits(**limits))
    try:
        yield bridge
    finally:
        stop.set()
        bridge.runner.close("the test is over", 30)
        bridge.server.close()


def helper(bridge: Bridge, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIBESYS_")}
    env |= {
        "VIBESYS_EVAL_SOCKET": str(bridge.socket_path),
        "VIBESYS_EVAL_TOKEN": bridge.token,
        "VIBESYS_EVAL_RUN": "campaign-1",
        "VIBESYS_EVAL_WORKSPACE": str(bridge.workspace),
    }
    return subprocess.Popen(
        [sys.executable, str(CLIENT), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def connected(bridge: Bridge, first: bytes = b"") -> socket.socket:
    peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    peer.settimeout(10)
    peer.connect(str(bridge.socket_path))
    if first:
        peer.sendall(first)
    return peer


def first_answer(peer: socket.socket) -> dict[str, Any]:
    data = b""
    while b"\n" not in data:
        chunk = peer.recv(65536)
        assert chunk, data
        data += chunk
    answer: dict[str, Any] = json.loads(data.split(b"\n")[0])
    return answer


def test_a_trickling_peer_is_cut_at_its_absolute_deadline(tmp_path: Path, workspace: Path) -> None:
    with served(tmp_path, workspace, request_seconds=1.0, drain_seconds=0.5) as bridge:
        peer = connected(bridge, SECRET)
        started = time.monotonic()
        answer: list[bytes] = []
        cut = ended = None
        while ended is None and time.monotonic() - started < 10:
            time.sleep(0.1)
            try:
                peer.sendall(b"x")  # each byte in time for any per-read timeout
                peer.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    if data := peer.recv(65536):
                        answer.append(data)
                        cut = time.monotonic() - started
                peer.setblocking(True)
            except OSError:
                ended = time.monotonic() - started
        peer.close()
    reply = json.loads(b"".join(answer))
    assert reply["type"] == "refused" and reply["field"] is None
    assert reply["message"] == "request: no complete line within 1 s"
    assert b"not-to-be-echoed" not in b"".join(answer)
    assert cut is not None and 0.9 < cut < 2.0, cut  # the deadline, not the bytes, decides
    assert ended is not None and ended - cut < 1.5, (cut, ended)  # drained 0.5 s, then closed
    assert bridge.server.gate.open_connections == 0


def test_a_refused_peer_is_drained_a_bounded_number_of_bytes(
    tmp_path: Path, workspace: Path
) -> None:
    # 30 s to drain, 64 KiB: the bytes end it, not the time.
    with served(tmp_path, workspace, drain_seconds=30.0, drain_bytes=64 * 1024) as bridge:
        peer = connected(bridge, b"not json\n")
        assert first_answer(peer)["message"].startswith("malformed message: not JSON")
        started, sent = time.monotonic(), 0
        peer.settimeout(5)
        with pytest.raises(OSError):
            while time.monotonic() - started < 10:
                sent += peer.send(b"y" * 16384)
        assert time.monotonic() - started < 3
        assert sent < 64 * 1024 + (4 << 20)  # the cap and the sockets' buffers
        peer.close()
        wait_until(lambda: bridge.server.gate.draining == 0, 20.0, "the drain to end")


def test_the_accept_loop_answers_at_once_while_peers_trickle(
    tmp_path: Path, workspace: Path
) -> None:
    limits = {"max_connections": 4, "request_seconds": 30.0, "drain_seconds": 30.0}
    with served(tmp_path, workspace, **limits) as bridge:
        tricklers = Tricklers(bridge.socket_path, 40, SECRET, every=0.1)
        try:
            gate = bridge.server.gate
            wait_until(lambda: gate.open_connections == 4 and gate.draining == 36, 20.0, "40 peers")
            for _ in range(10):
                started = time.monotonic()
                with connected(bridge) as peer:
                    answer = first_answer(peer)
                assert time.monotonic() - started < 0.5
                assert answer == {
                    "version": 1,
                    "type": "busy",
                    "retry_after": 1.0,
                    "message": "the bridge is busy (4 connections open, its limit); try again",
                }
        finally:
            tricklers.close()
    assert not any(b"not-to-be-echoed" in data for data in tricklers.answers)


def test_the_connections_of_one_uid_are_capped(workspace: Path) -> None:
    # pytest's tmp_path lies under a 0700 directory of root's that another user cannot enter.
    root = Path(tempfile.mkdtemp(prefix="vibesys-bridge-cap-"))
    root.chmod(0o755)
    limits = {"max_connections": 8, "max_per_uid": 2, "request_seconds": 30.0}
    try:
        with served(root / "b", workspace, **limits) as bridge:
            idle = [connected(bridge), connected(bridge)]
            wait_until(lambda: bridge.server.gate.open_connections == 2, 20.0, "2 connections")
            with connected(bridge) as third:
                answer = first_answer(third)
            uid = os.getuid()
            assert answer["type"] == "busy"
            assert f"uid {uid} has 2 connections open, its limit" in answer["message"]
            if os.geteuid() == 0:  # another uid still gets in
                other = throwaway_uid()
                bridge.server.socket.allowed_uids = frozenset({uid, other})
                bridge.socket_path.parent.chmod(0o755)
                bridge.socket_path.chmod(0o666)
                line = json.dumps({"version": 1, "op": "capabilities", "token": bridge.token})
                (reply,) = as_other(other, bridge.socket_path, line.encode() + b"\n")
                assert reply["type"] == "capabilities"
            for peer in idle:
                peer.close()
            wait_until(
                lambda: bridge.server.gate.open_connections == 0, 20.0, "the idle peers to go"
            )
            assert talk(bridge.socket_path, {"version": 1, "op": "capabilities", "token": "x"})
    finally:
        shutil.rmtree(root)


def test_80_trickling_peers_do_not_keep_a_helper_from_its_result(
    tmp_path: Path, workspace: Path
) -> None:
    with served(tmp_path, workspace, request_seconds=1.0) as bridge:
        bad = Tricklers(bridge.socket_path, 40, b"GET / HTTP/1.0\r\n\r\n")
        partial = Tricklers(bridge.socket_path, 40, SECRET)
        try:
            started = time.monotonic()
            proc = helper(bridge, "--retry-seconds", "20", "--", "sh", "-c", "echo hello")
            out, err = proc.communicate(timeout=30)
            assert proc.returncode == 0, err
            assert out.startswith("hello\n") and '"status": "COMPLETED"' in out
            assert time.monotonic() - started < 10
            # Every trickling peer is cut: at its deadline, after a drain of at most 1 s.
            wait_until(lambda: bad.ended + partial.ended == 80, 8, "every trickling peer to be cut")
            assert bridge.server.gate.open_connections == 0
        finally:
            bad.close()
            partial.close()


def test_a_busy_bridge_is_retried_within_retry_seconds(tmp_path: Path, workspace: Path) -> None:
    with served(tmp_path, workspace, max_connections=2, request_seconds=4.0) as bridge:
        idle = [connected(bridge), connected(bridge)]
        wait_until(lambda: bridge.server.gate.open_connections == 2, 20.0, "2 connections")
        started = time.monotonic()
        short = helper(bridge, "--retry-seconds", "1", "--", "true")
        _, err = short.communicate(timeout=30)
        assert short.returncode == 255, err
        assert "the bridge is busy (2 connections open, its limit); try again (in 1 s)" in err
        assert "gave up after 1 s" in err and time.monotonic() - started < 3.5
        patient = helper(bridge, "--retry-seconds", "15", "--", "echo", "served")
        out, err = patient.communicate(timeout=30)
        assert patient.returncode == 0, err
        assert "the bridge is busy" in err and out.startswith("served\n")
        for peer in idle:
            peer.close()
        assert bridge.counts() == (1, 1)  # the busy answers recorded nothing


def _lines(stream: Any, into: list[str]) -> None:
    with stream:
        for line in stream:
            into.append(line)


def test_a_stopped_bridge_is_noticed_by_its_missing_heartbeats(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    bridge = subprocess.Popen(
        [sys.executable, "-m", "tests.bridge.serve_bridge", str(tmp_path), "0.3"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )
    assert bridge.stdin is not None and bridge.stdout is not None
    eval_env = json.loads(bridge.stdout.readline())
    base = {k: v for k, v in os.environ.items() if not k.startswith("VIBESYS_")} | eval_env

    def helper_of(marker: Path, retry: str, sleep: int) -> tuple[subprocess.Popen[str], list[str]]:
        script = f"echo before; sleep 1.5; touch {marker}; sleep {sleep}; echo after"
        proc = subprocess.Popen(
            [sys.executable, str(CLIENT), "--retry-seconds", retry, "--", "sh", "-c", script],
            env=base,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        said: list[str] = []
        threading.Thread(target=_lines, args=(proc.stderr, said), daemon=True).start()
        return proc, said

    try:
        # Stopped a while, then continued: the helper reconnects and resumes, no byte twice.
        proc, said = helper_of(tmp_path / "one", "30", 2)
        wait_until(lambda: (tmp_path / "one").exists(), 20.0, "the first command to start")
        # 1.5 s without output: the heartbeats (0.3 s) kept the helper from a reconnect.
        assert not any("no word" in line for line in said), said
        bridge.send_signal(signal.SIGSTOP)
        wait_until(
            lambda: any("no word from the bridge for 0.9 s" in s for s in said), 5, "silence"
        )
        bridge.send_signal(signal.SIGCONT)
        assert proc.stdout is not None
        with proc.stdout:
            out = proc.stdout.read()
        assert proc.wait(timeout=30) == 0, said
        assert out.count("before\n") == 1 and out.count("after\n") == 1
        assert any("trying again with the same request id" in s for s in said)
        # Stopped for good: 255 once --retry-seconds have passed since the last reply.
        proc, said = helper_of(tmp_path / "two", "1.5", 30)
        wait_until(lambda: (tmp_path / "two").exists(), 20.0, "the second command to start")
        bridge.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        assert proc.stdout is not None
        proc.stdout.close()
        assert proc.wait(timeout=20) == 255
        assert time.monotonic() - stopped < 6  # 0.9 s of silence, then 1.5 s of retries
        wait_until(lambda: any("gave up after 1.5 s" in s for s in said), 2, "the last word")
    finally:
        bridge.send_signal(signal.SIGCONT)
        bridge.stdin.close()
        bridge.wait(timeout=30)
        bridge.stdout.close()
