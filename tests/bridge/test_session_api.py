"""`vibesys.Session` as a framework uses it (local site, real processes and sockets): a real
`vibesys-eval` given the session's environment evaluates a command; the end of the `with`
block, an exception in it while an evaluation runs, an asyncio cancel, SIGTERM of the
framework's process (with a handler and without) and a partial start each leave nothing: no
socket, token or environment file, no child process, no thread, no process of an evaluation."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bridge.session_helpers import BUDGET, result_line
from tests.helpers.hang_guard import wait_until
from tests.test_layering import imports_of
from vibesys.bridge.capabilities import SessionCapabilities
from vibesys.bridge.notes import render_notes
from vibesys.errors import UsageError, VibesysError
from vibesys.session import Mount, Session

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
#: A command that says where it runs, then runs until it is stopped.
LONG = "echo $$ > {pidfile}; exec sleep 60"


def leftovers(state: Path) -> list[str]:
    """What teardown must not leave: sockets, tokens, the container's environment file."""
    return sorted(
        str(p.relative_to(state))
        for p in state.rglob("*")
        if p.is_socket() or p.name in ("eval-token", "gpu-token", "container.env")
    )


def children() -> list[int]:
    """This process's children, zombies included (every thread's)."""
    found: list[int] = []
    for task in Path("/proc/self/task").iterdir():
        with open(task / "children", encoding="ascii") as handle:
            found += [int(pid) for pid in handle.read().split()]
    return sorted(found)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.fixture
def baseline() -> Iterator[tuple[list[int], int]]:
    yield children(), threading.active_count()


def assert_nothing_left(state: Path, baseline: tuple[list[int], int]) -> None:
    assert leftovers(state) == []
    assert children() == baseline[0]
    assert threading.active_count() == baseline[1], threading.enumerate()


def open_session(root: Path, lines: list[str] | None = None, **options: object) -> Session:
    (root / "ws").mkdir(exist_ok=True)
    return Session(
        "campaign-1",
        root / "ws",
        journal=root / ".vibesys" / "journal.db",
        state_dir=root / "state",
        teardown_seconds=30,
        log=(lines.append if lines is not None else lambda _line: None),
        **({"local": True} | options),  # type: ignore[arg-type]
    )


def helper(session: Session, *args: str, **extra: str) -> subprocess.Popen[str]:
    """vibesys-eval, as the container runs it: the session's environment and nothing else of
    vibesys's."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("VIBESYS_")}
    return subprocess.Popen(
        [sys.executable, str(session.clients["vibesys-eval"]), *args],
        cwd=session.document["workspace"],
        env=base | session.environment | extra,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_session_serves_a_real_helper_and_leaves_nothing(
    tmp_path: Path, baseline: tuple[list[int], int]
) -> None:
    lines: list[str] = []
    with open_session(tmp_path, lines, allow_env=["SEED"]) as session:
        state, results = session.state_dir, session.results_dir
        env = session.environment
        assert env["VIBESYS_EVAL_TOKEN"].startswith("vbeval1.") and "VIBESYS_GPU" not in env
        assert session.env_file.read_text().count("\n") == len(env)
        eval_client = session.clients["vibesys-eval"]
        assert set(session.clients) == {"vibesys-eval"}
        socket_dir = Path(env["VIBESYS_EVAL_SOCKET"]).parent
        assert session.mounts == (
            Mount(tmp_path / "ws", tmp_path / "ws", False),
            Mount(socket_dir, socket_dir, False),
            Mount(results, results, True),
            Mount(eval_client, eval_client, True),
        )
        assert session.mounts[2].volume == f"{results}:{results}:ro"
        assert isinstance(session.capabilities, SessionCapabilities)
        assert session.capabilities.env == ("SEED",) and session.capabilities.local_confined
        assert session.notes() == render_notes(session.capabilities)
        assert env["VIBESYS_EVAL_TOKEN"] not in repr(session)
        proc = helper(
            session, "--env", "SEED", "--", "sh", "-c", "echo seed=$SEED; exit 3", SEED="7"
        )
        out, err = proc.communicate(timeout=BUDGET)
        assert proc.returncode == 3, err
        assert out.splitlines()[0] == "seed=7" and result_line(out)["exit_code"] == 3
        proc = helper(session, "--", "sh", "-c", "echo accuracy 0.93")
        out, err = proc.communicate(timeout=BUDGET)
        assert proc.returncode == 0, err
        assert out.startswith("accuracy 0.93\n") and result_line(out)["status"] == "COMPLETED"
    assert session.close() == 0 and not session.running
    assert "vibesys session: torn down" in lines
    assert_nothing_left(state, baseline)
    assert len(list(results.iterdir())) == 2  # the results stay
    with pytest.raises(UsageError, match="not serving"):
        _ = session.environment


def test_an_exception_in_the_block_cancels_the_running_evaluation(
    tmp_path: Path, baseline: tuple[list[int], int]
) -> None:
    pidfile = tmp_path / "pid"
    session = open_session(tmp_path, unconfined=True)
    with pytest.raises(RuntimeError, match="the framework failed"), session:
        proc = helper(session, "--", "sh", "-c", LONG.format(pidfile=pidfile))
        wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), BUDGET, "the command")
        raise RuntimeError("the framework failed")
    out, err = proc.communicate(timeout=BUDGET)
    assert proc.returncode == 130, err
    result = result_line(out)
    assert result["status"] == "CANCELLED" and "session teardown: SIGTERM" in result["reason"]
    assert not alive(int(pidfile.read_text()))
    assert session.close() == 0
    assert_nothing_left(tmp_path / "state", baseline)


def test_an_asyncio_cancel_closes_the_session(
    tmp_path: Path, baseline: tuple[list[int], int]
) -> None:
    opened: list[Session] = []

    async def framework() -> None:
        with open_session(tmp_path) as session:
            opened.append(session)
            await asyncio.sleep(600)

    async def main() -> None:
        task = asyncio.create_task(framework())
        while not opened:
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert opened[0].close() == 0 and not opened[0].running
    assert_nothing_left(tmp_path / "state", baseline)


FRAMEWORK = """
import os, signal, subprocess, sys, time
from pathlib import Path
from vibesys.session import Session

root, handled = Path(sys.argv[1]), sys.argv[2] == "handled"
if handled:  # what a framework that wants its own teardown does: SIGTERM unwinds the stack
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
with Session("campaign-1", root / "ws", local=True, unconfined=True, state_dir=root / "state",
             journal=root / ".vibesys" / "journal.db", teardown_seconds=30) as session:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIBESYS_")}
    with open(root / "helper.out", "w") as out:
        subprocess.Popen([sys.executable, str(session.clients["vibesys-eval"]), "--", "sh", "-c",
                          sys.argv[3]], env=env | session.environment, cwd=root / "ws",
                         stdout=out, stderr=subprocess.DEVNULL)
    print(session.pid, flush=True)
    time.sleep(600)
"""


@pytest.mark.parametrize("handled", ["handled", "default", "killed"])
def test_sigterm_of_the_framework_leaves_nothing(tmp_path: Path, handled: str) -> None:
    # Handled: the `with` block closes the session. Default (the process just dies) and
    # killed: the serve's parent watch tears it down.
    (tmp_path / "ws").mkdir()
    pidfile = tmp_path / "pid"
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ) | {"PYTHONPATH": path}
    env.pop("VIBESYS_FAILPOINTS", None)
    command = LONG.format(pidfile=pidfile)
    argv = [sys.executable, "-c", FRAMEWORK, str(tmp_path), handled, command]
    framework = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert framework.stdout is not None
        serve = int(framework.stdout.readline())
        wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), BUDGET, "the command")
        framework.send_signal(signal.SIGKILL if handled == "killed" else signal.SIGTERM)
        _, err = framework.communicate(timeout=BUDGET)
    finally:
        if framework.poll() is None:
            framework.kill()
    if handled == "handled":
        assert framework.returncode == 143, err
        assert "tearing down: SIGTERM received" in err and "torn down" in err
    else:
        signum = signal.SIGKILL if handled == "killed" else signal.SIGTERM
        assert framework.returncode == -signum
    wait_until(lambda: not alive(serve), BUDGET, "the session to end")
    assert not alive(int(pidfile.read_text()))
    wait_until(
        lambda: "CANCELLED" in (tmp_path / "helper.out").read_text(), BUDGET, "the helper's result"
    )
    assert leftovers(tmp_path / "state") == []


GPU_SITE = (
    "[slurm]\nname = 'local'\nremote_workspace_root = '/tmp'\n[slurm.transport]\n"
    "kind = 'local'\n[vibesys.agent_gpu]\npartitions = ['main']\nmax_gpus = 1\n"
    "max_time_minutes = 5\ndefault_time_minutes = 1\n"
)


def test_a_site_with_gpu_commands_gives_the_broker_too(
    tmp_path: Path, baseline: tuple[list[int], int]
) -> None:
    # Nothing is submitted: the broker listens, the session lists it, the teardown stops it.
    config = tmp_path / "slurm.toml"
    config.write_text(GPU_SITE)
    with open_session(tmp_path, local=False, slurm_config=config, check=False) as session:
        env = session.environment
        assert env["VIBESYS_GPU_TOKEN"].startswith("vbgpu1.") and env["CUDA_VISIBLE_DEVICES"] == ""
        gpu_client = session.clients["vibesys-gpu"]
        assert env["VIBESYS_GPU"] == str(gpu_client)
        gpu_dir = Path(env["VIBESYS_GPU_SOCKET"]).parent
        assert Mount(gpu_dir, gpu_dir, False) in session.mounts
        assert Mount(gpu_client, gpu_client, True) in session.mounts
        assert session.capabilities.gpu_commands and session.capabilities.gpu_limits is not None
        assert "vibesys-gpu" in session.notes()
        assert (gpu_dir / "gpu.sock").is_socket()
    assert session.close() == 0
    assert_nothing_left(tmp_path / "state", baseline)


def test_a_start_interrupted_once_the_serve_listens_leaves_nothing(
    tmp_path: Path, baseline: tuple[list[int], int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C right after the document: the serve listens, the Session has not returned yet.
    def interrupted(_session: Session) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Session, "_ask_capabilities", interrupted)
    lines: list[str] = []
    session = open_session(tmp_path, lines)
    with pytest.raises(KeyboardInterrupt):
        session.start()
    assert "vibesys session: tearing down: SIGTERM received" in lines
    assert session.close() == 0 and not session.running
    assert_nothing_left(tmp_path / "state", baseline)


def test_a_start_past_its_timeout_leaves_nothing(
    tmp_path: Path, baseline: tuple[list[int], int]
) -> None:
    # The serve hangs before it listens: its experiment file is a FIFO nobody writes.
    os.mkfifo(tmp_path / "experiment.toml")
    session = open_session(tmp_path, resources=tmp_path / "experiment.toml", start_timeout=1.0)
    with pytest.raises(VibesysError, match=r"^the session did not start within 1\.0 s$"):
        session.start()
    assert session.close() == -signal.SIGTERM and not session.running
    assert_nothing_left(tmp_path / "state", baseline)


def test_vibesys_itself_never_imports_the_session_api() -> None:
    # It sits beside the CLI, for frameworks: nothing below may depend on it.
    package = ROOT / "vibesys"
    users = [
        str(path.relative_to(ROOT))
        for path in package.rglob("*.py")
        if path.name != "__init__.py" or path.parent != package
        if any(name == "vibesys.session" for name in imports_of(path))
    ]
    assert users == []


def test_a_partial_start_leaves_nothing(tmp_path: Path, baseline: tuple[list[int], int]) -> None:
    # A site with GPU commands: the bridge starts, then the broker cannot (its socket's path is
    # taken by a directory). The serve undoes what it started; the Session says why.
    config = tmp_path / "slurm.toml"
    config.write_text(GPU_SITE)
    (tmp_path / "state" / "gpu" / "gpu.sock").mkdir(parents=True)
    lines: list[str] = []
    session = open_session(tmp_path, lines, local=False, slurm_config=config, check=False)
    with pytest.raises(UsageError, match=r"^the session did not start: the session could not"):
        session.start()
    assert any("tearing down: the start failed" in line for line in lines), lines
    assert session.close() == 2 and not session.running
    assert_nothing_left(tmp_path / "state", baseline)
