"""The local adapter against real processes: the marker contract and the reading rule."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.hang_guard import wait_until
from vibesys.adapters import local as local_module
from vibesys.adapters.base import JobContext, JobRef, RemoteState, RemoteStatus, SubmitRequest
from vibesys.adapters.local import LocalBackend
from vibesys.adapters.local_request import LocalRequest
from vibesys.adapters.rundir.claim import parse_claim
from vibesys.errors import BackendMisconfigured, BackendUnavailable, SubmitRejected
from vibesys.osutil import proc


@pytest.fixture(autouse=True)
def no_wrapper_left_behind(tmp_path: Path) -> Iterator[None]:
    """A test that fails half-way must not leave a stopped wrapper behind for the others."""
    yield
    needle = str(tmp_path).encode()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes()
            except OSError:
                continue
            if b"local_wrapper.py" in cmdline and needle in cmdline:
                os.kill(int(entry.name), signal.SIGKILL)


def request_for(attempt_dir: Path, *command: str, cwd: str | None = None) -> SubmitRequest[Any]:
    context = JobContext(cwd or str(attempt_dir.parent), dict(os.environ))
    return SubmitRequest(
        "inv", 1, job_name_for(attempt_dir), command, attempt_dir, context, LocalRequest()
    )


def job_name_for(attempt_dir: Path) -> str:
    """A job name no other test uses (wrappers are found by name)."""
    return f"vibesys-{abs(hash(str(attempt_dir))):x}-1"


def submit(backend: LocalBackend, attempt_dir: Path, *command: str) -> JobRef:
    request = request_for(attempt_dir, *command)
    receipt = backend.submit(request)
    return JobRef(request.job_name, receipt.job_id, attempt_dir)


def wait_terminal(backend: LocalBackend, ref: JobRef, timeout: float = 20) -> RemoteStatus:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = backend.status([ref])[ref.job_name]
        if status.state not in (RemoteState.PENDING, RemoteState.RUNNING):
            return status
        time.sleep(0.02)
    raise AssertionError(f"hang guard: {ref.job_name} did not end within {timeout:.0f} s")


def test_every_status_says_where_the_attempt_ran(tmp_path: Path) -> None:
    """Provenance, as every adapter records it: the host, the wrapper's pid, when it started
    and, once it ended, when (from its claim and its exit marker)."""
    backend = LocalBackend()
    ref = submit(backend, tmp_path / "run", "sh", "-c", "sleep 1.1")
    running = backend.status([ref])[ref.job_name]
    assert running.state is RemoteState.RUNNING
    assert running.provenance["host"] == os.uname().nodename
    assert running.provenance["pid"] == ref.job_id and "end" not in running.provenance
    ended = wait_terminal(backend, ref)
    started, finished = ended.provenance["start"], ended.provenance["end"]
    assert datetime.fromisoformat(started) < datetime.fromisoformat(finished)
    assert started.endswith("+00:00") and finished.endswith("+00:00"), "UTC, zone stated"


@pytest.mark.parametrize(
    ("command", "state", "code"),
    [
        (("true",), RemoteState.COMPLETED, 0),
        (("sh", "-c", "exit 3"), RemoteState.FAILED, 3),
        (("sh", "-c", "kill -9 $$"), RemoteState.FAILED, 137),
        (("sh", "-c", "kill -TERM $$"), RemoteState.FAILED, 143),
        (("no-such-command-vibesys",), RemoteState.FAILED, 127),
    ],
)
def test_exit_status_contract(
    tmp_path: Path, command: tuple[str, ...], state: RemoteState, code: int
) -> None:
    backend = LocalBackend()
    ref = submit(backend, tmp_path / "run", *command)
    status = wait_terminal(backend, ref)
    assert (status.state, status.exit_code) == (state, code)
    assert (tmp_path / "run" / "exit_code").read_text() == f"{code}\n"


def test_output_goes_to_files_with_hostile_arguments(tmp_path: Path) -> None:
    backend = LocalBackend()
    odd = 'it\'s $(whoami) `id` "quoted"\nnew line'
    ref = submit(backend, tmp_path / "run", "printf", "%s|", odd, "two words")
    assert wait_terminal(backend, ref).exit_code == 0
    assert (tmp_path / "run" / "stdout").read_text() == f"{odd}|two words|"


def test_running_then_cancelled(tmp_path: Path) -> None:
    backend = LocalBackend()
    # Only the cancel can end it: the command would sleep far past wait_terminal's guard.
    ref = submit(backend, tmp_path / "run", "sleep", "600")
    assert backend.status([ref])[ref.job_name].state is RemoteState.RUNNING
    backend.cancel(ref)
    status = wait_terminal(backend, ref)
    assert status.state is RemoteState.CANCELLED and status.cancelled_by == "vibesys"
    assert status.exit_code == 143  # SIGTERM ended it: no escalation was needed


def test_cancel_escalates_to_kill_for_a_command_that_ignores_term(tmp_path: Path) -> None:
    backend = LocalBackend()
    ref = submit(backend, tmp_path / "run", "sh", "-c", "trap '' TERM; sleep 30 & wait; sleep 30")
    time.sleep(0.2)
    backend.cancel(ref)
    status = wait_terminal(backend, ref, timeout=15)
    assert status.state is RemoteState.CANCELLED and status.exit_code == 137


def test_never_launched_is_not_found(tmp_path: Path) -> None:
    ref = JobRef("vibesys-x-1", None, tmp_path / "nothing")
    status = LocalBackend().status([ref])[ref.job_name]
    assert status.state is RemoteState.NOT_FOUND


def test_launch_without_claim_is_pending_then_not_found_but_never_proven(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "launch.json").write_text(json.dumps({"job_name": "vibesys-y-1"}))
    ref = JobRef("vibesys-y-1", None, run)
    assert LocalBackend().status([ref])[ref.job_name].state is RemoteState.PENDING
    old = time.time() - 60
    os.utime(run / "launch.json", (old, old))
    status = LocalBackend().status([ref])[ref.job_name]
    # Silence is not absence: NOT_FOUND without a claim asks the engine for a fence.
    assert (status.state, status.claim, status.final) == (RemoteState.NOT_FOUND, None, False)


def test_started_without_marker_and_without_process_is_unknown(tmp_path: Path) -> None:
    backend = LocalBackend()
    ref = submit(backend, tmp_path / "run", "sleep", "30")
    pid = wrapper_pid(tmp_path / "run")
    group = json.loads(wait_for_file(tmp_path / "run" / "group"))
    # Kill the wrapper and the command together: nobody is left to write a marker.
    os.kill(pid, signal.SIGKILL)
    os.killpg(int(group["pgid"]), signal.SIGKILL)
    status = wait_terminal(backend, ref)
    assert status.state is RemoteState.UNKNOWN
    assert status.exit_code is None and status.final


def test_job_outlives_its_submitter(tmp_path: Path) -> None:
    """The wrapper runs in its own session: a killed submitter leaves the job running."""
    backend = LocalBackend()
    ref = submit(backend, tmp_path / "run", "sh", "-c", "sleep 0.5; echo survived")
    pid = wrapper_pid(tmp_path / "run")
    assert os.getsid(pid) == pid
    assert os.getsid(pid) != os.getsid(0)
    assert wait_terminal(backend, ref).exit_code == 0
    assert (tmp_path / "run" / "stdout").read_text() == "survived\n"


def test_empty_command_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(SubmitRejected):
        LocalBackend().submit(request_for(tmp_path / "run"))


def wrapper_pid(attempt_dir: Path) -> int:
    claim = parse_claim((attempt_dir / "claim").read_text())
    assert claim is not None and claim.kind == "job"
    return int(claim.get("pid"))


def wait_for_file(path: Path, timeout: float = 10) -> str:
    wait_until(path.exists, timeout, f"{path} to appear", interval=0.01)
    return path.read_text()


def stalled_submit(backend: LocalBackend, attempt_dir: Path, *command: str) -> SubmitRequest[Any]:
    """Launch a wrapper that stops itself (SIGSTOP) just before it claims its attempt."""
    request = request_for(attempt_dir, *command)
    stalled = SubmitRequest(
        request.invocation_id,
        request.attempt,
        request.job_name,
        request.command,
        attempt_dir,
        JobContext(
            request.context.cwd,
            {**request.context.env, "VIBESYS_STALL": "first_wrapper_before_claim"},
        ),
        request.spec,
    )
    with pytest.raises(BackendUnavailable) as raised:
        backend.submit(stalled)
    assert raised.value.maybe_submitted, "a launched wrapper may still run: not proof of absence"
    return stalled


def test_a_fence_stops_a_stalled_wrapper_from_ever_running(tmp_path: Path) -> None:
    backend = LocalBackend(launch_grace=0.4)
    run = tmp_path / "1"
    witness = tmp_path / "ran"
    stalled_submit(backend, run, "touch", str(witness))
    [pid] = local_module._wrapper_pids(job_name_for(run))
    ref = JobRef(job_name_for(run), None, run)
    assert backend.status([ref])[ref.job_name].state is RemoteState.PENDING  # within the grace
    time.sleep(0.5)
    status = backend.status([ref])[ref.job_name]
    assert status.state is RemoteState.NOT_FOUND and status.claim is None
    assert "a wrapper process exists" in status.observation
    claim = backend.fence(ref, "kind=fence\nby=test\n")
    assert claim.fenced
    assert backend.fence(ref, "kind=fence\nby=again\n").get("by") == "test", "idempotent"
    wait_gone(pid)  # the fence ends the stalled wrapper
    assert not witness.exists()
    assert backend.status([ref])[ref.job_name].claim == claim


def test_a_stalled_wrapper_that_resumes_after_the_fence_refuses(tmp_path: Path) -> None:
    """The fence, not the kill, is what proves the attempt dead: a wrapper that wakes up after
    it (the kill missed it, or it is on another host) runs nothing and says why."""
    backend = LocalBackend(launch_grace=0.4)
    run = tmp_path / "1"
    witness = tmp_path / "ran"
    stalled_submit(backend, run, "touch", str(witness))
    [pid] = local_module._wrapper_pids(job_name_for(run))
    (run / "claim").write_text("kind=fence\nby=another host\n")  # a fence, and no kill
    os.kill(pid, signal.SIGCONT)
    wait_gone(pid)
    assert not witness.exists()
    assert "claimed by someone else" in (run / "refused").read_text()
    assert not (run / "exit_code").exists()


def test_a_claim_that_won_the_race_is_kept(tmp_path: Path) -> None:
    backend = LocalBackend()
    ref = submit(backend, tmp_path / "run", "sleep", "30")
    claim = backend.fence(ref, "kind=fence\nby=test\n")
    assert claim.kind == "job" and claim.get("pid") == ref.job_id
    assert backend.status([ref])[ref.job_name].state is RemoteState.RUNNING
    backend.cancel(ref)
    assert wait_terminal(backend, ref).state is RemoteState.CANCELLED


def test_a_cancel_before_the_claim_stops_the_command_from_starting(tmp_path: Path) -> None:
    backend = LocalBackend(launch_grace=0.4)
    run = tmp_path / "1"
    witness = tmp_path / "ran"
    stalled_submit(backend, run, "touch", str(witness))
    [pid] = local_module._wrapper_pids(job_name_for(run))
    ref = JobRef(job_name_for(run), None, run)
    backend.cancel(ref)  # the cancel marker first, then SIGTERM (pending while stopped)
    os.kill(pid, signal.SIGCONT)
    status = wait_terminal(backend, JobRef(job_name_for(run), str(pid), run))
    assert status.state is RemoteState.CANCELLED
    assert not witness.exists()


def test_cancel_reaches_the_command_when_its_wrapper_died(tmp_path: Path) -> None:
    """SIGKILL the supervising wrapper: the command runs on in its own group. Cancel signals the
    group, and reports CANCELLED only once nothing of it runs."""
    backend = LocalBackend()
    run = tmp_path / "run"
    ref = submit(backend, run, "sh", "-c", "trap '' TERM; while :; do sleep 0.1; done")
    group = json.loads(wait_for_file(run / "group"))
    os.kill(wrapper_pid(run), signal.SIGKILL)
    time.sleep(0.2)
    status = backend.status([ref])[ref.job_name]
    assert status.state is RemoteState.RUNNING and "still run" in status.observation
    backend.cancel(ref)  # SIGTERM: ignored by the command
    time.sleep(0.3)
    assert backend.status([ref])[ref.job_name].state is RemoteState.RUNNING
    os.utime(run / "cancel_requested", (time.time() - 60, time.time() - 60))
    backend.cancel(ref)  # repeated after the grace period: SIGKILL
    status = wait_terminal(backend, ref)
    assert status.state is RemoteState.CANCELLED and status.exit_code is None
    assert proc.group_members(int(group["pgid"])) == []


def test_the_job_runs_in_the_recorded_context(tmp_path: Path) -> None:
    backend = LocalBackend()
    workdir = tmp_path / "work"
    workdir.mkdir()
    run = tmp_path / "run"
    context = JobContext(str(workdir), {"PATH": os.environ["PATH"], "ONLY_HERE": "yes"})
    request = SubmitRequest(
        "inv",
        1,
        "vibesys-inv-1",
        ("sh", "-c", 'pwd; echo "$ONLY_HERE"; env | wc -l'),
        run,
        context,
        LocalRequest(),
    )
    receipt = backend.submit(request)
    assert wait_terminal(backend, JobRef("vibesys-inv-1", receipt.job_id, run)).exit_code == 0
    out = (run / "stdout").read_text().splitlines()
    assert out[:2] == [str(workdir), "yes"]
    assert int(out[2]) <= 6, "nothing of the submitting process's environment leaks in"


def test_a_missing_working_directory_is_a_misconfiguration(tmp_path: Path) -> None:
    request = request_for(tmp_path / "run", "true", cwd=str(tmp_path / "gone"))
    with pytest.raises(BackendMisconfigured) as raised:
        LocalBackend().submit(request)
    assert raised.value.maybe_submitted is False and "gone" in str(raised.value)
    assert not (tmp_path / "run" / "launch.json").exists(), "nothing was launched"


def wait_gone(pid: int, timeout: float = 10) -> None:
    wait_until(lambda: proc.start_time(pid) is None, timeout, f"pid {pid} to end")
