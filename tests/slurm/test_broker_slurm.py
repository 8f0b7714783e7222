"""`vibesys-gpu` through a real `vibesys broker serve`, real Slurm (fake GPUs) and real bwrap:
output streams and the status is the command's; interrupts cancel queued and running jobs;
every refusal names its reason and submits nothing (the run's cap, across its brokers:
test_broker_run_slurm.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from tests.helpers.hang_guard import wait_until
from tests.helpers.slurm import sacct_states, slurm
from vibesys.broker import client

pytestmark = pytest.mark.slurm

CLIENT = Path(client.__file__)
BUDGET = 60.0


class Broker(msgspec.Struct):
    process: subprocess.Popen[str]
    socket_path: Path
    token: str
    workspace: Path
    journal: Path
    prefix: str

    def env(self, **extra: str) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("VIBESYS_GPU")}
        return (
            base
            | {
                "VIBESYS_GPU_SOCKET": str(self.socket_path),
                "VIBESYS_GPU_TOKEN": self.token,
            }
            | extra
        )

    def client(self, *args: str, cwd: Path | None = None, **extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, str(CLIENT), *args],
            cwd=cwd or self.workspace,
            env=self.env(**extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def jobs(self) -> dict[str, str]:
        """Job name → state of this broker's jobs squeue knows (all states)."""
        out = slurm("squeue", "-h", "--states=all", "-o", "%j|%T")
        pairs = (line.strip().split("|") for line in out.splitlines() if line.strip())
        return {name: state for name, state in pairs if name.startswith(self.prefix + "-")}


def write_config(path: Path, remote: Path, prefix: str, cap: int | None, partitions: str) -> Path:
    lines = [
        "[slurm]",
        'name = "local"',
        f"remote_workspace_root = {json.dumps(str(remote))}",
        "poll_initial_seconds = 0.2",
        "poll_max_seconds = 1",
        "",
        "[slurm.transport]",
        'kind = "local"',
        "",
        "[vibesys.agent_gpu]",
        f"partitions = {partitions}",
        "max_gpus = 2",
        "max_time_minutes = 60",
        "default_time_minutes = 5",
        f'job_name_prefix = "{prefix}"',
    ]
    if cap is not None:
        lines.append(f"max_concurrent_jobs = {cap}")
    path.write_text("\n".join(lines) + "\n")
    return path


def start_broker(
    root: Path,
    name: str,
    cap: int | None = None,
    partitions: str = '["main", "priority"]',
    *,
    journal: Path | None = None,
    run_id: str | None = None,
    config: Path | None = None,
    env: dict[str, str] | None = None,
) -> Broker:
    root.mkdir(parents=True, exist_ok=True)
    workspace = root / "ws"
    workspace.mkdir()
    prefix = f"vbt-{name}-{os.getpid()}"
    if config is None:
        config = write_config(root / "slurm.toml", root / "remote", prefix, cap, partitions)
    journal = journal or root / ".vibesys" / "journal.db"
    argv = [sys.executable, "-m", "vibesys", "broker", "serve", "--slurm-config", str(config)]
    argv += ["--workspace", str(workspace), "--state-dir", str(root / "state")]
    argv += ["--journal", str(journal), *(["--run-id", run_id] if run_id else [])]
    process = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=root,
        env={**os.environ, **(env or {})},
    )
    assert process.stdout is not None
    printed = dict(process.stdout.readline().split(" ", 1) for _ in range(3))
    socket_path = Path(printed["socket"].strip())
    token_file = Path(printed["token_file"].strip())
    assert token_file.stat().st_mode & 0o777 == 0o600
    assert socket_path.parent.stat().st_mode & 0o777 == 0o700
    return Broker(process, socket_path, token_file.read_text().strip(), workspace, journal, prefix)


def stop_broker(broker: Broker) -> str:
    if broker.process.poll() is None:
        broker.process.send_signal(signal.SIGTERM)
    _, err = broker.process.communicate(timeout=BUDGET)
    return err


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    started = start_broker(tmp_path, tmp_path.name[-12:].strip("_"))
    yield started
    stop_broker(started)


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=BUDGET)
    return proc.returncode, out, err


def journal_rows(broker: Broker) -> list[dict[str, object]]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "vibesys",
            "journal",
            "list",
            "--json",
            "--journal",
            str(broker.journal),
        ],
        capture_output=True,
        text=True,
        timeout=BUDGET,
        check=True,
    )
    rows: list[dict[str, object]] = json.loads(done.stdout)["invocations"]
    return rows


# -- running ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "status"),
    [("exit 0", 0), ("exit 3", 3), ("kill -9 $$", 137)],
)
def test_status_and_output(broker: Broker, script: str, status: int) -> None:
    (broker.workspace / "sub").mkdir()
    code, out, err = finish(
        broker.client(
            "--gpus",
            "1",
            "--time",
            "2",
            "--",
            "bash",
            "-c",
            f'echo "out $PWD $CUDA_VISIBLE_DEVICES"; echo err >&2; {script}',
            cwd=broker.workspace / "sub",
        )
    )
    assert code == status, err
    assert out == f"out {broker.workspace / 'sub'} 0\n"
    assert "err" in err.splitlines()  # srun may add its own line (task 0: Exited ...)
    (row,) = journal_rows(broker)
    assert row["adapter"] == "srun" and row["state"] == "DONE"
    assert row["exit_code"] == status
    (name,) = broker.jobs()
    assert name == f"{broker.prefix}-{row['id']}-1"


def test_output_streams_while_the_job_runs(broker: Broker) -> None:
    gate = broker.workspace / "go-on"
    proc = broker.client(
        "--gpus",
        "0",
        "--",
        "bash",
        "-c",
        f"echo first; while [ ! -e {gate} ]; do sleep 0.1; done; echo second",
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "first\n"  # arrives while the job waits for the gate
    assert broker.jobs() and set(broker.jobs().values()) <= {"RUNNING", "COMPLETING"}
    gate.touch()
    code, out, _ = finish(proc)
    assert (code, out) == (0, "second\n")


def test_the_job_is_confined(broker: Broker, tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("secret")
    (broker.workspace / "escape").symlink_to(tmp_path / "outside.txt")
    code, out, err = finish(
        broker.client(
            "--gpus",
            "0",
            "--",
            "bash",
            "-c",
            f"cat {tmp_path}/outside.txt escape 2>/dev/null || echo hidden; "
            "echo made > made; env | grep -c '^SLURM_' || true",
        )
    )
    assert (code, out) == (0, "hidden\n0\n"), err
    assert (broker.workspace / "made").read_text() == "made\n"


# -- stopping --------------------------------------------------------------------------------


@pytest.mark.parametrize("queued", [False, True], ids=["running", "queued"])
def test_interrupting_the_client_cancels_the_job(
    broker: Broker, request: pytest.FixtureRequest, queued: bool
) -> None:
    if queued:
        request.getfixturevalue("all_gpus_taken")
    proc = broker.client("--gpus", "1", "--", "sleep", "60")
    wanted = "PENDING" if queued else "RUNNING"
    wait_until(
        lambda: wanted in broker.jobs().values(), BUDGET, f"the job to be {wanted}", interval=0.1
    )
    (name,) = broker.jobs()
    proc.send_signal(signal.SIGINT)
    code, _, err = finish(proc)
    assert code == 130 and "interrupted: the job is cancelled" in err
    assert sacct_states(name) == ["CANCELLED"]
    wait_until(
        lambda: journal_rows(broker)[0]["state"] == "DONE",
        BUDGET,
        "the broker to settle",
        interval=0.1,
    )
    assert journal_rows(broker)[0]["outcome"] == "CANCELLED"


def test_a_broker_crash_is_reconciled_by_name(broker: Broker) -> None:
    proc = broker.client("--gpus", "0", "--", "sleep", "60")
    wait_until(lambda: "RUNNING" in broker.jobs().values(), BUDGET, "the job to run", interval=0.1)
    broker.process.kill()
    broker.process.wait(BUDGET)
    finish(proc)
    (name,) = broker.jobs()
    (row,) = journal_rows(broker)
    journal = ["--journal", str(broker.journal)]
    run = {"capture_output": True, "text": True, "timeout": BUDGET, "check": False}
    # The client went away with the broker: reconcile finds the job by its name and cancels
    # it (nobody would read its output), and records CANCELLED once the scheduler shows it.
    done = subprocess.run([sys.executable, "-m", "vibesys", "reconcile", *journal], **run)  # type: ignore[call-overload]
    assert done.returncode in (0, 4), done.stderr
    assert name.endswith(f"-{row['id']}-1") and str(row["id"]) in done.stdout
    wait_until(
        lambda: sacct_states(name) == ["CANCELLED"], BUDGET, "the job to be cancelled", interval=0.1
    )
    done = subprocess.run(
        [sys.executable, "-m", "vibesys", "wait", str(row["id"]), *journal], **run
    )  # type: ignore[call-overload]
    assert done.returncode == 130, done.stderr
    assert journal_rows(broker)[0]["outcome"] == "CANCELLED"


# -- refusals --------------------------------------------------------------------------------


def refused(proc: subprocess.Popen[str], message: str) -> None:
    code, out, err = finish(proc)
    assert (code, out) == (2, "")
    assert f"vibesys-gpu: refused: {message}" in err


def test_refusals_submit_nothing(broker: Broker, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (broker.workspace / "escape").symlink_to(outside)
    refused(broker.client("--", "true", VIBESYS_GPU_TOKEN="wrong"), "bad token")
    refused(
        broker.client("--", "true", cwd=outside),
        "commands must run from inside the run's workspace",
    )
    refused(
        broker.client("--", "true", cwd=broker.workspace / "escape"),
        "commands must run from inside",
    )
    refused(
        broker.client("--gpus", "3", "--", "true"),
        "--gpus 3 exceeds vibesys.agent_gpu.max_gpus (2)",
    )
    refused(
        broker.client("--time", "61", "--", "true"),
        "--time 61 exceeds vibesys.agent_gpu.max_time_minutes (60)",
    )
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(BUDGET)
        conn.connect(str(broker.socket_path))
        conn.sendall(json.dumps({"version": 2, "token": broker.token}).encode() + b"\n")
        reply = json.loads(conn.makefile("rb").readline())
    assert reply["type"] == "refused"
    assert reply["message"].startswith("unsupported protocol version 2 (this broker speaks 1)")
    assert broker.jobs() == {} and journal_rows(broker) == []


def test_another_candidates_worktree_is_refused(tmp_path: Path) -> None:
    a = start_broker(tmp_path / "a", f"a{tmp_path.name[-8:]}")
    b = start_broker(tmp_path / "b", f"b{tmp_path.name[-8:]}")
    try:
        # A's agent asks its own broker to run in B's worktree ...
        refused(
            a.client("--", "true", cwd=b.workspace),
            "commands must run from inside the run's workspace",
        )
        # ... or asks B's broker with A's token.
        refused(
            a.client("--", "true", cwd=b.workspace, VIBESYS_GPU_SOCKET=str(b.socket_path)),
            "bad token",
        )
        code, out, _ = finish(b.client("--gpus", "0", "--", "pwd", cwd=b.workspace))
        assert (code, out) == (0, f"{b.workspace}\n")
        assert a.jobs() == {}
    finally:
        stop_broker(a)
        stop_broker(b)


# -- stopping --------------------------------------------------------------------------------


def test_stopping_the_broker_cancels_its_jobs(broker: Broker) -> None:
    proc = broker.client("--gpus", "0", "--", "sleep", "60")
    wait_until(lambda: "RUNNING" in broker.jobs().values(), BUDGET, "the job to run", interval=0.1)
    (name,) = broker.jobs()
    log = stop_broker(broker)
    code, _, _ = finish(proc)
    assert code == 130, log
    assert sacct_states(name) == ["CANCELLED"]
    assert journal_rows(broker)[0]["outcome"] == "CANCELLED"


def test_no_partition_fits_exits_2_with_the_reason(tmp_path: Path) -> None:
    broker = start_broker(tmp_path, f"p{tmp_path.name[-8:]}", partitions='["short"]')
    try:
        code, out, err = finish(broker.client("--gpus", "0", "--time", "10", "--", "true"))
    finally:
        stop_broker(broker)
    assert (code, out) == (2, "")
    assert "REJECTED" in err and "no partition fits --time 10: short 5 min" in err
    assert broker.jobs() == {}
