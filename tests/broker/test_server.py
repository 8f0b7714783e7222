"""The broker's socket end to end, with the real `vibesys-gpu` client but a scripted runner in
place of Slurm: refusals, streaming, exit statuses, peer credentials, disconnects, the cap."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.bridge.helpers import Tricklers
from tests.helpers.hang_guard import wait_until
from vibesys.broker import client
from vibesys.broker.admission import Admission
from vibesys.broker.jobs import GpuJob, OutputSink, StopSignal
from vibesys.broker.protocol import MAX_CALL_BYTES
from vibesys.broker.server import BrokerServer
from vibesys.broker.slots import JobSlots
from vibesys.config.slurm import AgentGpuConfig
from vibesys.service.connections import Limits

CLIENT = Path(client.__file__)
BUDGET = 20.0
LIMITS = AgentGpuConfig(
    partitions=("main",), max_gpus=2, max_time_minutes=60, default_time_minutes=5
)


@dataclass
class ScriptedRunner:
    """Prints its argv, then either exits with argv[1] or, for `hold`, waits to be stopped."""

    started: list[GpuJob] = field(default_factory=list)
    stopped: list[GpuJob] = field(default_factory=list)

    def run(self, job: GpuJob, output: OutputSink, stop: StopSignal) -> int:
        self.started.append(job)
        output.write("stdout", f"running {' '.join(job.argv)}\n".encode())
        output.write("stderr", b"to stderr\n")
        if job.argv[0] == "hold":
            stop.wait(BUDGET)
            self.stopped.append(job)
            return 130
        if job.argv[0] == "big":
            output.write("stdout", b"x" * 300_000 + b"\n")
        return int(job.argv[1]) if len(job.argv) > 1 else 0


@dataclass
class Broker:
    server: BrokerServer
    runner: ScriptedRunner
    socket_path: Path
    workspace: Path
    log: list[str]

    def env(self, token: str = "tok") -> dict[str, str]:
        return {
            **os.environ,
            "VIBESYS_GPU_SOCKET": str(self.socket_path),
            "VIBESYS_GPU_TOKEN": token,
        }

    def client(
        self, *args: str, token: str = "tok", cwd: Path | None = None
    ) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, str(CLIENT), *args],
            cwd=cwd or self.workspace,
            env=self.env(token),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )


@contextlib.contextmanager
def make_broker(
    tmp_path: Path,
    cap: int | None = None,
    uids: frozenset[int] | None = None,
    limits: Limits | None = None,
    slots: JobSlots | None = None,
) -> Iterator[Broker]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    log: list[str] = []
    runner = ScriptedRunner()
    server = BrokerServer(
        admission=Admission("tok", str(workspace.resolve()), LIMITS, {"PATH": "/usr/bin"}),
        runner=runner,
        slots=slots or JobSlots(cap),
        socket_path=state / "gpu.sock",
        allowed_uids=uids if uids is not None else frozenset({os.getuid()}),
        log=log.append,
        limits=limits or Limits(max_connections=8),
    )
    server.listen()
    stop = threading.Event()
    thread = threading.Thread(target=server.serve_forever, args=(stop,), daemon=True)
    thread.start()
    try:
        yield Broker(server, runner, state / "gpu.sock", workspace, log)
    finally:
        stop.set()
        thread.join(BUDGET)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with make_broker(tmp_path) as started:
        yield started


def finish(proc: subprocess.Popen[bytes]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=BUDGET)
    return proc.returncode, out.decode(), err.decode()


def raw_exchange(path: Path, payload: bytes) -> list[dict[str, object]]:
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(BUDGET)
        conn.connect(str(path))
        conn.sendall(payload)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    return [json.loads(line) for line in data.splitlines()]


def test_the_socket_is_private(broker: Broker) -> None:
    assert broker.socket_path.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("status", ["0", "3", "137"])
def test_output_and_exit_status_pass_through(broker: Broker, status: str) -> None:
    code, out, err = finish(broker.client("--gpus", "1", "--", "echo", status))
    assert (code, out, err) == (int(status), f"running echo {status}\n", "to stderr\n")
    job = broker.runner.started[-1]
    assert job.sandbox.cwd == str(broker.workspace.resolve())
    assert "VIBESYS_GPU_TOKEN" not in job.env


def test_large_output_arrives_whole(broker: Broker) -> None:
    code, out, _ = finish(broker.client("--", "big", "0"))
    assert code == 0 and out.endswith("x" * 300_000 + "\n")


def test_peer_credentials_are_recorded(broker: Broker) -> None:
    proc = broker.client("--", "echo", "0")
    finish(proc)
    assert any(f"accepted pid={proc.pid} uid={os.getuid()}" in line for line in broker.log)


def test_a_uid_not_allowed_is_refused(tmp_path: Path) -> None:
    with make_broker(tmp_path, uids=frozenset({os.getuid() + 4242})) as broker:
        code, _, err = finish(broker.client("--", "echo", "0"))
        assert code == 2 and f"refused: uid {os.getuid()} may not use this broker" in err
        assert broker.runner.started == []


@pytest.mark.parametrize(
    ("args", "token", "cwd", "message"),
    [
        (["--", "echo"], "wrong", None, "bad token"),
        (
            ["--gpus", "3", "--", "echo"],
            "tok",
            None,
            "--gpus 3 exceeds vibesys.agent_gpu.max_gpus (2)",
        ),
        (["--time", "61", "--", "echo"], "tok", None, "--time 61 exceeds"),
        (["--", "echo"], "tok", "/", "commands must run from inside the run's workspace"),
    ],
)
def test_refusals_reach_the_client(
    broker: Broker, args: list[str], token: str, cwd: str | None, message: str
) -> None:
    code, out, err = finish(broker.client(*args, token=token, cwd=Path(cwd) if cwd else None))
    assert code == 2 and out == "" and message in err
    assert broker.runner.started == []


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"{nonsense\n", "malformed message: not JSON"),
        (b'{"version": 99}\n', "unsupported protocol version 99"),
        (b'{"version": 1, "token": "tok"}\n', "missing field 'cwd'"),
    ],
)
def test_malformed_requests_are_refused(broker: Broker, payload: bytes, message: str) -> None:
    replies = raw_exchange(broker.socket_path, payload)
    assert len(replies) == 1 and replies[0]["type"] == "refused"
    assert message in str(replies[0]["message"])


def test_an_oversized_request_is_refused_without_waiting_for_its_end(broker: Broker) -> None:
    replies = raw_exchange(broker.socket_path, b"x" * (MAX_CALL_BYTES + 10))
    assert replies == [
        {"version": 1, "type": "refused", "message": f"line exceeds {MAX_CALL_BYTES} bytes"}
    ]


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "kill"])
def test_a_client_that_goes_away_stops_its_running_command(broker: Broker, how: str) -> None:
    proc = broker.client("--", "hold")
    wait_until(lambda: broker.runner.started, BUDGET, "the command to start")
    if how == "kill":
        proc.kill()
    else:
        proc.send_signal(getattr(signal, how))
    code, _, err = finish(proc)
    wait_until(lambda: broker.runner.stopped, BUDGET, "the runner to be stopped")
    assert code == (-9 if how == "kill" else 130)
    if how != "kill":
        assert "interrupted: the job is cancelled" in err


def test_cap_two_four_clients_fifo_and_a_stopped_waiter_never_runs(tmp_path: Path) -> None:
    with make_broker(tmp_path, cap=2) as broker:
        holders = [broker.client("--", "hold", str(i)) for i in range(2)]
        wait_until(lambda: len(broker.runner.started) == 2, BUDGET, "two commands to run")
        third = broker.client("--", "echo", "0")
        wait_until(lambda: broker.server.slots.waiting == 1, BUDGET, "the third to wait")
        fourth = broker.client("--", "echo", "4")
        wait_until(lambda: broker.server.slots.waiting == 2, BUDGET, "the fourth to wait")
        # A waiter that is stopped leaves nothing behind: the fifth never runs.
        fifth = broker.client("--", "echo", "5")
        wait_until(lambda: broker.server.slots.waiting == 3, BUDGET, "the fifth to wait")
        fifth.send_signal(signal.SIGINT)
        code, _, err = finish(fifth)
        assert code == 130
        assert err.endswith("interrupted: the job is cancelled\n"), err
        # The server counts the fifth as waiting before its client may have printed so.
        said = "[vibesys-gpu] waiting: 2 of this run's GPU jobs are active (cap 2), 2 queued ahead"
        assert "waiting" not in err or err.startswith(said), err
        wait_until(lambda: broker.server.slots.waiting == 2, BUDGET, "the fifth to leave")
        assert len(broker.runner.started) == 2
        holders[0].send_signal(signal.SIGINT)
        code, _, err = finish(third)
        assert code == 0
        assert err == (
            "[vibesys-gpu] waiting: 2 of this run's GPU jobs are active (cap 2), 0 queued ahead\n"
            "to stderr\n"
        )
        code, _, err = finish(fourth)
        assert code == 4 and "1 queued ahead" in err
        holders[1].send_signal(signal.SIGINT)
        for holder in holders:
            finish(holder)
        assert [job.argv for job in broker.runner.started[2:]] == [("echo", "0"), ("echo", "4")]


def test_too_many_connections_are_refused(tmp_path: Path) -> None:
    with make_broker(tmp_path) as broker, contextlib.ExitStack() as idle:
        for _ in range(8):
            conn = idle.enter_context(socket.socket(socket.AF_UNIX))
            conn.connect(str(broker.socket_path))
        wait_until(lambda: broker.server.gate.open_connections == 8, BUDGET, "8 connections")
        code, _, err = finish(broker.client("--", "echo", "0"))
        assert code == 2 and "the broker is busy" in err


def test_trickling_peers_are_cut_and_do_not_hold_up_a_shutdown(tmp_path: Path) -> None:
    """The bridge's admission layer guards the broker too: 20 peers sending a line without its
    end, a byte every 0.1 s, fill the 8 slots; the accept loop still answers at once; each is
    cut 1 s after its accept (drained 0.5 s); a shutdown with peers trickling is immediate."""
    limits = Limits(max_connections=8, request_seconds=1.0, drain_seconds=0.5)
    with make_broker(tmp_path, limits=limits) as broker:
        peers = Tricklers(broker.socket_path, 20, b'{"version": 1, "token": "tok', every=0.1)
        try:
            started = time.monotonic()
            code, _, err = finish(broker.client("--", "echo", "0"))
            assert code == 2 and "the broker is busy (8 connections open, its limit)" in err
            assert time.monotonic() - started < 2
            wait_until(lambda: peers.ended == 20, BUDGET, "every peer to be cut")
            assert time.monotonic() - started < 4
            assert not any(b"tok" in answer for answer in peers.answers)
            code, out, _ = finish(broker.client("--", "echo", "0"))
            assert (code, out) == (0, "running echo 0\n")
        finally:
            peers.close()
        peers = Tricklers(broker.socket_path, 20, b'{"version": 1', every=0.1, again=True)
        try:
            wait_until(lambda: broker.server.gate.open_connections == 8, BUDGET, "8 connections")
            started = time.monotonic()
            broker.server.shutdown(grace_seconds=10)
            assert time.monotonic() - started < 1.5  # cut at once, not at their deadline
        finally:
            peers.close()


def test_the_client_without_a_broker(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIBESYS_GPU")}
    done = subprocess.run(
        [sys.executable, str(CLIENT), "--", "true"],
        env=env,
        capture_output=True,
        text=True,
        timeout=BUDGET,
    )
    assert done.returncode == 2 and "VIBESYS_GPU_SOCKET" in done.stderr
    env |= {"VIBESYS_GPU_SOCKET": str(tmp_path / "none.sock"), "VIBESYS_GPU_TOKEN": "t"}
    done = subprocess.run(
        [sys.executable, str(CLIENT), "--", "true"],
        env=env,
        capture_output=True,
        text=True,
        timeout=BUDGET,
    )
    assert done.returncode == 2 and "cannot reach the broker" in done.stderr


def test_a_broker_that_vanishes_mid_command_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "fake.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(1)

    def half_answer() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(b'{"version":1,"type":"output","stream":"stdout","data":"aGkK"}\n')
        conn.close()

    threading.Thread(target=half_answer, daemon=True).start()
    env = {**os.environ, "VIBESYS_GPU_SOCKET": str(path), "VIBESYS_GPU_TOKEN": "t"}
    done = subprocess.run(
        [sys.executable, str(CLIENT), "--", "true"],
        env=env,
        capture_output=True,
        text=True,
        timeout=BUDGET,
    )
    listener.close()
    assert (done.returncode, done.stdout) == (255, "hi\n")
    assert "lost the connection to the broker" in done.stderr


class CarryingOnSlots(JobSlots):
    """Slots whose carrying on of dead brokers' jobs lasts until it is told to stop."""

    def __init__(self) -> None:
        super().__init__(None)
        self.began = threading.Event()
        self.ended = threading.Event()

    def carry_on(self, stop: StopSignal) -> None:
        self.began.set()
        stop.wait(BUDGET)
        self.ended.set()


def test_dead_brokers_jobs_are_carried_on_beside_the_serving(tmp_path: Path) -> None:
    slots = CarryingOnSlots()
    with make_broker(tmp_path, slots=slots) as broker:
        assert slots.began.wait(BUDGET)
        code, out, _ = finish(broker.client("--", "ok", "0"))
        assert (code, out) == (0, "running ok 0\n") and not slots.ended.is_set()
    assert slots.ended.is_set()  # the shutdown told it to stop and waited for it
