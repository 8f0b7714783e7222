"""Nothing of a local job outlives it: the wrapper is its subreaper, and its marker is written
only once every process the command started (setsid'd, double-forked, stopped) is gone."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.adapters.test_local import submit, wait_terminal, wrapper_pid
from tests.helpers.escapees import Escapees, escapees
from tests.helpers.hang_guard import wait_until
from vibesys.adapters.base import RemoteState
from vibesys.adapters.local import WRAPPER, LocalBackend
from vibesys.adapters.local_leftovers import left_running
from vibesys.adapters.rundir.claim import parse_claim
from vibesys.osutil import proc

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def leftovers() -> Iterator[Escapees]:
    made = escapees()
    yield made
    made.kill_any_left()


def test_a_job_that_ends_leaves_nothing_running(tmp_path: Path, leftovers: Escapees) -> None:
    backend = LocalBackend()
    # The command waits until the test has seen all three, so they did run under it.
    script = leftovers.script(f"while [ ! -e {tmp_path / 'go'} ]; do sleep 0.05; done")
    ref = submit(backend, tmp_path / "run", "sh", "-c", script)
    leftovers.wait_started()
    (tmp_path / "go").touch()
    status = wait_terminal(backend, ref)
    assert (status.state, status.exit_code) == (RemoteState.COMPLETED, 0)
    leftovers.assert_gone()  # the marker is written only after the last of them is reaped
    assert not (tmp_path / "run" / "survivors").exists()


def test_a_cancel_ends_what_left_the_group(tmp_path: Path, leftovers: Escapees) -> None:
    backend = LocalBackend()
    ref = submit(backend, tmp_path / "run", "sh", "-c", leftovers.script("sleep 100"))
    leftovers.wait_started()
    backend.cancel(ref)
    status = wait_terminal(backend, ref)
    assert (status.state, status.exit_code) == (RemoteState.CANCELLED, 143)
    leftovers.assert_gone()


def test_a_respawning_daemon_is_ended_with_all_it_spawned(tmp_path: Path) -> None:
    """A detached loop that keeps starting processes: each round kills what exists, and what
    it started meanwhile is found in the next."""
    witness, loop_pid = tmp_path / "spawned", tmp_path / "loop"
    loop = f"while :; do sleep 300 & echo $! >> {witness}; sleep 0.01; done"
    script = f"setsid sh -c '{loop}' & echo $! > {loop_pid}; sleep 0.5"
    backend = LocalBackend()
    try:
        ref = submit(backend, tmp_path / "run", "sh", "-c", script)
        status = wait_terminal(backend, ref)
        assert (status.state, status.exit_code) == (RemoteState.COMPLETED, 0)
        spawned = [int(line) for line in witness.read_text().split()]
        assert len(spawned) > 5
        assert [pid for pid in spawned if proc.start_time(pid) is not None] == []
    finally:  # the loop leads its own group: a failed test must not leave it spawning
        with contextlib.suppress(OSError, ValueError):
            os.killpg(int(loop_pid.read_text()), signal.SIGKILL)


def test_a_killed_wrappers_session_is_still_the_job(tmp_path: Path) -> None:
    """SIGKILL the wrapper: what stayed in its session (a double-forked process, out of the
    command's group) reads as the job still running, and a cancel reaches it."""
    backend = LocalBackend()
    run = tmp_path / "run"
    leave_group = "import os; os.setpgid(0, 0); os.execvp('sleep', ['sleep', '302'])"
    detached = f'{sys.executable} -c "{leave_group}" & echo $! > {tmp_path / "pid"}'
    ref = submit(backend, run, "sh", "-c", f"({detached}); sleep 100")
    try:
        pid_file = tmp_path / "pid"
        # The shell creates the file before it writes the pid: wait for the whole line.
        wait_until(
            lambda: pid_file.exists() and pid_file.read_text().endswith("\n"),
            10,
            "the detached process",
        )
        daemon = int(pid_file.read_text())
        wait_until(lambda: _is_sleep(daemon), 10, "the detached process to exec")
        group = json.loads((run / "group").read_text())
        assert os.getpgid(daemon) != group["pgid"], "it left the command's group"
        assert os.getsid(daemon) == group["sid"] == int(ref.job_id or 0)
        wrapper = wrapper_pid(run)
        os.kill(wrapper, signal.SIGKILL)
        # A SIGKILL is delivered when the kernel next runs the process: until then it reads
        # as alive (and the status names it, not what stayed in its session).
        wait_until(lambda: proc.start_time(wrapper) is None, 5, "the wrapper to die")
        os.killpg(group["pgid"], signal.SIGKILL)  # only what left the group remains
        wait_until(lambda: proc.group_members(group["pgid"]) == [], 5, "the group to end")
        status = backend.status([ref])[ref.job_name]
        assert status.state is RemoteState.RUNNING and str(daemon) in status.observation
        backend.cancel(ref)
        status = wait_terminal(backend, ref)
        assert status.state is RemoteState.CANCELLED
        assert proc.start_time(daemon) is None
    finally:  # a failed test must not leave the job's processes behind
        for pid in proc.session_members(int(ref.job_id or 0)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_survivors_the_wrapper_gave_up_on_are_read_as_the_job(tmp_path: Path) -> None:
    with subprocess.Popen(["sleep", "60"]) as stuck:
        started = proc.start_time(stuck.pid)
        (tmp_path / "survivors").write_text(f"{stuck.pid} {started}\n{2**22 + 7} 1\n")
        claim = parse_claim("kind=job\npid=0\n")
        assert claim is not None
        assert left_running(tmp_path, claim) == [stuck.pid]
        stuck.kill()
        stuck.wait()
        assert left_running(tmp_path, claim) == []


def test_the_wrapper_started_by_hand_ends_what_its_command_left(tmp_path: Path) -> None:
    """The wrapper alone (no adapter, not a session leader): the same contract."""
    made = escapees()
    try:
        run = tmp_path / "run"
        run.mkdir()
        script = made.script("sleep 0.3")
        began = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-I", "-S", str(WRAPPER), str(run), "j", "--", "sh", "-c", script],
            timeout=30,
            check=False,
        )
        assert done.returncode == 0 and (run / "exit_code").read_text() == "0\n"
        made.assert_gone()
        assert time.monotonic() - began < 10
    finally:
        made.kill_any_left()


def _is_sleep(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\0")
    except OSError:
        return False
