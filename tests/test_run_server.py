"""`vibesys run` served by a warm process (run_client.py, run_server.py): the served run answers
exactly as its own process would, signals reach it, it dies with its client, a frozen server is
passed over without ever running the evaluation twice, and only an identical context is served.

Each test has its own private runtime directory, so its servers are its own, and kills them at
the end. The job prints its ancestors: a served run's job does not descend from the client."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from vibesys import run_client
from vibesys.proc import is_alive, processes, start_time

ANCESTRY = (
    "import os\n"
    "p, chain = os.getpid(), []\n"
    "while p > 1:\n"
    "    p = int(open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[1])\n"
    "    chain.append(p)\n"
    "print('ancestry', *chain)\n"
)

#: A job's first step: write its ancestry to `chain`, whole (renamed into place).
CHAIN = f"{sys.executable} ancestry.py > chain.part && mv chain.part chain"


@dataclass
class Context:
    env: dict[str, str]
    project: Path
    runtime: Path

    def start(self, *argv: str, **extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "vibesys", *argv],
            cwd=self.project,
            env={**self.env, **extra},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(self, *argv: str, **extra: str) -> tuple[int, str, str, int]:
        """(exit status, stdout, stderr, the client's pid)."""
        process = self.start(*argv, **extra)
        out, err = process.communicate(timeout=60)
        return process.returncode, out, err, process.pid

    def call(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """Any command, in this context, from the project directory."""
        return subprocess.run(
            list(argv),
            cwd=self.project,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def sockets(self) -> list[Path]:
        return sorted(self.runtime.glob("vibesys-*/run-*.sock"))

    def servers(self) -> list[int]:
        mark = f"{self.runtime}/".encode()
        return [pid for pid, cmdline in processes("cmdline") if mark in cmdline]

    def invocations(self) -> int:
        with sqlite3.connect(self.project / ".vibesys" / "journal.db") as conn:
            count: int = conn.execute("SELECT count(*) FROM invocations").fetchone()[0]
        return count


@pytest.fixture
def context() -> Iterator[Context]:
    # A short path of our own: a socket's path must fit in 108 bytes.
    base = Path(tempfile.mkdtemp(prefix="vs-rs-"))
    runtime = base / "rt"
    runtime.mkdir(mode=0o700)
    project = base / "p"
    project.mkdir()
    (project / "ancestry.py").write_text(ANCESTRY)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "VIBESYS_RUN_SERVER": "1"}
    env[run_client.PERSIST] = "30"
    env.pop("VIBESYS_FAILPOINTS", None)
    ctx = Context(env, project, runtime)
    try:
        yield ctx
    finally:
        for pid in ctx.servers():
            _kill(pid, signal.SIGCONT)
            _kill(pid, signal.SIGKILL)
        shutil.rmtree(base, ignore_errors=True)


def served_run(ctx: Context, *argv: str) -> tuple[int, str, str, int]:
    """Run until a server has started for this context, then once more through it."""
    ctx.run("run", "--", "true")
    await_socket(ctx)
    return ctx.run(*argv)


def await_socket(ctx: Context) -> None:
    deadline = time.monotonic() + 20
    while not ctx.sockets():
        assert time.monotonic() < deadline, "no server started"
        time.sleep(0.05)


def _normal(out: str) -> list[str]:
    """Output lines but the ancestry, with invocation ids made alike."""
    lines = [line for line in out.splitlines() if not line.startswith("ancestry")]
    return [re.sub("[0-9a-f]{16}", "ID", line) for line in lines]


def ancestry(out: str) -> list[int]:
    line = next(line for line in out.splitlines() if line.startswith("ancestry"))
    return [int(p) for p in line.split()[1:]]


def test_a_served_run_answers_as_its_own_process_would(context: Context) -> None:
    shell = (
        f"{sys.executable} ancestry.py; env | grep -v ^VIBESYS_RUN_SERVER= | sort; pwd; umask; "
        "echo to-err >&2; exit 3"
    )
    job = ["--", "sh", "-c", shell]
    status, out, err, client = served_run(context, "run", *job)
    assert client not in ancestry(out), "the job ran under the client: not served"
    assert context.servers(), "no server runs"
    here = context.run("run", *job, VIBESYS_RUN_SERVER="0")
    assert client != here[3] and here[3] in ancestry(here[1]), "the unserved run was served"
    # Same status, same environment, directory and umask, same output and report (but for
    # the invocation's id).
    assert status == here[0] == 3
    assert f"PWD={context.project}" in out.splitlines()
    assert _normal(out) == _normal(here[1])
    assert err.count("to-err") == here[2].count("to-err") == 1
    assert re.sub("[0-9a-f]{16}", "ID", err) == re.sub("[0-9a-f]{16}", "ID", here[2])
    assert "DONE APPLICATION_FAILED exit 3" in err
    # A form the fast parser leaves to typer is answered by typer, here.
    status, out, _, _ = context.run("run", "--help")
    assert status == 0 and "COMMAND" in out


def test_a_run_from_a_directory_that_is_gone_gets_the_same_one_line(context: Context) -> None:
    served_run(context, "run", "--", "true")
    gone = context.project / "gone"
    gone.mkdir()
    script = 'cd "$1" && rmdir "$1" && exec "$0" -m vibesys run -- true'
    done = context.call("sh", "-c", script, sys.executable, str(gone))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "vibesys: error: the current directory no longer exists; cd somewhere else"
    ]


def test_a_burst_from_nothing_starts_one_server(context: Context) -> None:
    burst = [context.start("run", "--", sys.executable, "ancestry.py") for _ in range(4)]
    results = [(process.communicate(timeout=60), process) for process in burst]
    assert [process.returncode for _, process in results] == [0, 0, 0, 0]
    await_socket(context)
    time.sleep(0.5)  # a second server, had one started, would hold its socket by now
    assert len(context.sockets()) == 1
    assert len(context.servers()) == 1
    # The run that found nobody ran in its own process (and started the server).
    local = [p for (out, _), p in results if p.pid in ancestry(out)]
    assert len(local) >= 1


def test_a_served_client_loads_none_of_the_run_machinery(context: Context) -> None:
    probe = (
        "import json, sys\n"
        "sys.argv = ['vibesys', 'run', '--', 'true']\n"
        "from vibesys.cli_fast import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        "print(json.dumps([code, sorted(sys.modules)]))\n"
    )

    def loaded() -> tuple[int, list[str]]:
        done = context.call(sys.executable, "-c", probe)
        code, modules = json.loads(done.stdout.splitlines()[-1])
        return code, modules

    loaded()  # no server for this context yet: it starts one and runs here
    await_socket(context)
    code, modules = loaded()
    assert code == 0
    heavy = [m for m in modules if m.split(".")[0] in ("pydantic", "transitions", "sqlite3")]
    heavy += [m for m in modules if m.startswith(("vibesys.engine", "vibesys.adapters"))]
    assert heavy == []


def test_a_signal_to_the_client_stops_the_served_run_as_its_own(context: Context) -> None:
    endings = served_and_own(context, signal.SIGINT, "sleep", "30")
    reports = [err.split(" ", 2)[2].split(":")[0] for _, err in endings]
    assert [status for status, _ in endings] == [130, 130]
    assert reports == ["DONE CANCELLED exit 143 attempt 1"] * 2


def test_a_signal_that_ends_the_served_run_ends_its_client_alike(context: Context) -> None:
    """SIGHUP, which a run does not handle, ends it: the client then ends by it too."""
    endings = served_and_own(context, signal.SIGHUP, "sleep", "5")
    assert [status for status, _ in endings] == [-signal.SIGHUP, -signal.SIGHUP]


def test_a_fork_that_closes_its_socket_a_moment_before_it_dies_ends_the_client_alike() -> None:
    # The fork's socket closes as it exits, a moment before the system counts it dead: the
    # client, which passed SIGHUP on, waits for the death instead of calling the end unknown.
    script = (
        "import signal, socket, subprocess, sys\n"
        "from vibesys import run_client\n"
        "from vibesys.proc import start_time\n"
        "mine, its = socket.socketpair()\n"
        "fork = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(0.3)'])\n"
        "its.close()  # the end of the socket comes first, the death 0.3 s later\n"
        "sys.exit(run_client._follow(mine, (fork.pid, start_time(fork.pid)), [signal.SIGHUP]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == -signal.SIGHUP, done.stderr


def served_and_own(ctx: Context, signum: int, *command: str) -> list[tuple[int, str]]:
    """(exit status, stderr) of `command` served, then run in its own process, each sent
    `signum` once its job runs. The processes never start deaf to the signal: they inherit
    this one's dispositions, and a test run under nohup ignores SIGHUP (as a run started under
    nohup rightly does), one started in the background SIGINT."""
    previous = signal.getsignal(signum)
    if previous == signal.SIG_IGN:
        signal.signal(signum, signal.SIG_DFL)
    try:
        served_run(ctx, "run", "--", "true")
        endings = []
        for mode in ("1", "0"):
            process = ctx.start("run", "--", *command, VIBESYS_RUN_SERVER=mode)
            _await_running(ctx)
            process.send_signal(signum)
            _, err = process.communicate(timeout=60)
            endings.append((process.returncode, err))
    finally:
        if previous == signal.SIG_IGN:
            signal.signal(signum, previous)
    return endings


def test_a_killed_client_takes_its_served_run_with_it(context: Context) -> None:
    served_run(context, "run", "--", "true")
    process = context.start("run", "--", "sh", "-c", f"{CHAIN}; sleep 30")
    chain = _await_chain(context)
    assert process.pid not in chain
    servers = set(context.servers())
    driver = next(p for p in chain if p in servers)  # the fork: a process of the server's
    process.kill()
    process.communicate(timeout=10)
    deadline = time.monotonic() + 10
    while _alive(driver):
        assert time.monotonic() < deadline, "the run outlived its client"
        time.sleep(0.05)


def test_a_killed_fork_leaves_its_client_one_line_and_reconcile_the_run(
    context: Context,
) -> None:
    """The run's owner killed (not its client): the client says so in one line and exits 1;
    the invocation is left as a killed run's is, and reconcile settles it."""
    served_run(context, "run", "--", "true")
    process = context.start("run", "--", "sh", "-c", f"{CHAIN}; sleep 2")
    chain = _await_chain(context)
    servers = set(context.servers())
    driver = next(p for p in chain if p in servers)
    os.kill(driver, signal.SIGKILL)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 1
    assert err.splitlines() == [
        f"vibesys: the process that ran this evaluation ({driver}) ended without an exit "
        "status; `vibesys reconcile` settles its invocation"
    ]
    assert _latest_state(context) == "RUNNING"
    done = context.call(sys.executable, "-m", "vibesys", "reconcile")
    deadline = time.monotonic() + 30
    while _latest_state(context) != "DONE":
        assert time.monotonic() < deadline, f"reconcile did not settle it: {done.stdout}"
        time.sleep(0.2)
        done = context.call(sys.executable, "-m", "vibesys", "reconcile")


def test_a_frozen_client_follows_its_run_without_stopping_it(context: Context) -> None:
    """SIGSTOP cannot be passed on: the fork, the run's owner, goes on, and the client reports
    its status once it is thawed (documented in operator-setup.md)."""
    served_run(context, "run", "--", "true")
    process = context.start("run", "--", "sh", "-c", "sleep 1; echo finished")
    _await_running(context)
    process.send_signal(signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 30
        while _latest_state(context) != "DONE":
            assert time.monotonic() < deadline, "the run stopped with its client"
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGCONT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0
    assert out.splitlines() == ["finished"]
    assert "DONE COMPLETED exit 0" in err


def test_a_frozen_server_is_passed_over_and_never_runs_the_evaluation(
    context: Context,
) -> None:
    served_run(context, "run", "--", "true")
    (server,) = context.servers()
    before = context.invocations()
    _kill(server, signal.SIGSTOP)
    try:
        status, out, _, client = context.run("run", "--", sys.executable, "ancestry.py")
        assert status == 0
        assert client in ancestry(out), "a frozen server cannot have run it"
    finally:
        _kill(server, signal.SIGCONT)
    # The server now takes the connection it held; its fork finds no "go" and leaves.
    time.sleep(1.5)
    status, out, _, client = context.run("run", "--", sys.executable, "ancestry.py")
    assert status == 0 and client not in ancestry(out), "the thawed server serves again"
    assert context.invocations() == before + 2


def test_a_fork_that_said_nothing_is_killed_before_the_client_runs_it_here(
    context: Context,
) -> None:
    """The client's fence (`_started_before_fence`): a fork that went silent after "ready" is
    killed, and the client runs the evaluation itself only if the fork never said "started"
    (it says so before any work), even if that word is still on its way."""
    served_run(context, "run", "--", "true")
    before = context.invocations()
    # Frozen before it read the request: it never starts, and its kill proves it never will.
    sock, fork, streams = _hand_over(context, ["run", "--", "true"], freeze=True)
    try:
        assert run_client._started_before_fence(sock, fork, b"") is False
        assert not is_alive(*fork)
    finally:
        _close(sock, streams)
    # Started, but the client did not hear it in time: after the kill, the word is found.
    sock, fork, streams = _hand_over(context, ["run", "--", "sleep", "5"], freeze=False)
    try:
        deadline = time.monotonic() + 30
        while context.invocations() == before:
            assert time.monotonic() < deadline, "the fork did not start the run"
            time.sleep(0.05)
        assert run_client._started_before_fence(sock, fork, b"") is True
        assert not is_alive(*fork)
    finally:
        _close(sock, streams)
    assert context.invocations() == before + 1


def _hand_over(
    ctx: Context, argv: list[str], *, freeze: bool
) -> tuple[socket.socket, tuple[int, str], list[int]]:
    """Speak the client's side by hand: connect, hear "ready", maybe freeze the fork, send the
    request with a pipe's ends as its standard streams, and stop listening there."""
    (socket_path,) = ctx.sockets()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(5)
    sock.connect(str(socket_path))
    ready = run_client._line(sock)
    assert ready.startswith(b"ready ")
    pid = int(ready[6:])
    started = start_time(pid)
    assert started is not None
    fork = (pid, started)
    if freeze:
        os.kill(pid, signal.SIGSTOP)
    read_end, write_end = os.pipe()
    fields = {"argv": argv, "cwd": str(ctx.project), "environment": ctx.env}
    request = json.dumps(fields).encode() + b"\n"
    socket.send_fds(sock, [request], [read_end, write_end, write_end])
    return sock, fork, [read_end, write_end]


def _close(sock: socket.socket, streams: list[int]) -> None:
    sock.close()
    for fd in streams:
        os.close(fd)


def test_a_dead_servers_socket_is_replaced(context: Context) -> None:
    served_run(context, "run", "--", "true")
    (server,) = context.servers()
    _kill(server, signal.SIGKILL)
    (socket_path,) = context.sockets()
    assert socket_path.exists()  # left behind: nobody listens
    status, out, _, client = served_run(context, "run", "--", sys.executable, "ancestry.py")
    assert status == 0 and client not in ancestry(out)
    assert server not in context.servers()


def test_a_server_leaves_once_idle(context: Context) -> None:
    context.env[run_client.PERSIST] = "1"
    served_run(context, "run", "--", "true")
    deadline = time.monotonic() + 15
    while context.servers() or context.sockets():
        assert time.monotonic() < deadline, "the server stayed"
        time.sleep(0.1)


def test_no_server_for_a_terminal_or_when_turned_off(context: Context) -> None:
    status, _, _, _ = context.run("run", "--", "true", VIBESYS_RUN_SERVER="0")
    assert status == 0
    assert context.sockets() == [] and context.servers() == []
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "vibesys", "run", "--", "true"],
            cwd=context.project,
            env=context.env,
            stdin=subprocess.DEVNULL,
            stdout=follower,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert done.returncode == 0
    assert context.sockets() == [] and context.servers() == []


def test_only_an_identical_context_shares_a_server(monkeypatch: pytest.MonkeyPatch) -> None:
    key = run_client.server_key()
    assert run_client.server_key() == key
    monkeypatch.setenv("VIBESYS_SOME_SETTING", "x")
    assert run_client.server_key() != key
    monkeypatch.delenv("VIBESYS_SOME_SETTING")
    assert run_client.server_key() == key
    old = os.umask(0o077)
    try:
        assert run_client.server_key() != key
    finally:
        os.umask(old)


def _await_running(ctx: Context) -> None:
    deadline = time.monotonic() + 30
    while _latest_state(ctx) != "RUNNING":
        assert time.monotonic() < deadline, "the run did not reach RUNNING"
        time.sleep(0.05)


def _latest_state(ctx: Context) -> str | None:
    with sqlite3.connect(ctx.project / ".vibesys" / "journal.db") as conn:
        row = conn.execute(
            "SELECT state FROM invocations ORDER BY created_at DESC LIMIT 1"
        ).fetchone()
    return None if row is None else str(row[0])


def _await_chain(ctx: Context) -> list[int]:
    """The ancestry the running job wrote with CHAIN (in the directory it runs in)."""
    deadline = time.monotonic() + 30
    while True:
        found = list(ctx.project.glob("chain")) + list(ctx.project.glob(".vibesys/runs/*/*/chain"))
        if found:
            return ancestry(found[0].read_text())
        assert time.monotonic() < deadline, "the job did not start"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    return is_alive(pid, None)


def _kill(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
