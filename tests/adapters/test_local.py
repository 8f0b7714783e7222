"""The local adapter against real processes: the marker contract and the reading rule."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from vibesys.adapters.base import JobRef, RemoteState, RemoteStatus, SubmitRequest
from vibesys.adapters.local import LocalBackend
from vibesys.errors import SubmitRejected


def submit(backend: LocalBackend, run_dir: Path, *command: str) -> JobRef:
    request = SubmitRequest("inv", 1, "vibesys-inv-1", command, run_dir)
    receipt = backend.submit(request)
    return JobRef(request.job_name, receipt.job_id, run_dir)


def wait_terminal(backend: LocalBackend, ref: JobRef, timeout: float = 20) -> RemoteStatus:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = backend.status([ref])[ref.job_name]
        if status.state not in (RemoteState.PENDING, RemoteState.RUNNING):
            return status
        time.sleep(0.02)
    raise AssertionError(f"hang guard: {ref.job_name} did not end within {timeout:.0f} s")


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


def test_launch_without_record_is_pending_then_proven_absent(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "launch.json").write_text(json.dumps({"job_name": "vibesys-y-1"}))
    ref = JobRef("vibesys-y-1", None, run)
    assert LocalBackend().status([ref])[ref.job_name].state is RemoteState.PENDING
    old = time.time() - 60
    os.utime(run / "launch.json", (old, old))
    assert LocalBackend().status([ref])[ref.job_name].state is RemoteState.NOT_FOUND


def test_started_without_marker_and_without_process_is_unknown(tmp_path: Path) -> None:
    backend = LocalBackend()
    ref = submit(backend, tmp_path / "run", "sleep", "30")
    record = json.loads((tmp_path / "run" / "job.json").read_text())
    # Kill the wrapper and the command together: nobody is left to write a marker.
    os.killpg(int(record["pid"]), signal.SIGKILL)
    status = wait_terminal(backend, ref)
    assert status.state is RemoteState.UNKNOWN
    assert status.exit_code is None


def test_job_outlives_its_submitter(tmp_path: Path) -> None:
    """The wrapper runs in its own session: a killed submitter leaves the job running."""
    backend = LocalBackend()
    ref = submit(backend, tmp_path / "run", "sh", "-c", "sleep 0.5; echo survived")
    record = json.loads((tmp_path / "run" / "job.json").read_text())
    assert os.getsid(int(record["pid"])) == int(record["pid"])
    assert os.getsid(int(record["pid"])) != os.getsid(0)
    assert wait_terminal(backend, ref).exit_code == 0
    assert (tmp_path / "run" / "stdout").read_text() == "survived\n"


def test_empty_command_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(SubmitRejected):
        LocalBackend().submit(SubmitRequest("inv", 1, "n", (), tmp_path))
