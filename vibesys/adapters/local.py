"""The embedded default: each job is a local process in its own session, so it outlives the
`vibesys` process that started it, exactly as a remote job would.

Files in the attempt's run directory:
- `launch.json`  written by the adapter before it spawns anything (the adapter's own intent);
- `job.json`     written by the wrapper before the command starts (pid + process start time);
- `stdout`, `stderr`, and `exit_code` (the atomic completion marker);
- `cancel_requested`, written before a cancel signal is sent.

Reading rule: marker present → finished with that code; record present and process alive →
running; no record and provably no wrapper → never started; record present, process gone, no
marker → UNKNOWN (never success).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vibesys.adapters.base import JobRef, RemoteState, RemoteStatus, SubmitReceipt, SubmitRequest
from vibesys.errors import BackendUnavailable, SubmitRejected
from vibesys.proc import is_alive

WRAPPER = Path(__file__).with_name("local_wrapper.py")
#: How long after `launch.json` a wrapper that has not yet written its record may still appear.
LAUNCH_GRACE_SECONDS = 5.0
CANCEL_MARKER = "cancel_requested"


class LocalBackend:
    name = "local"

    def submit(self, request: SubmitRequest) -> SubmitReceipt:
        if not request.command:
            raise SubmitRejected("empty command")
        run_dir = request.run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        launch = {"job_name": request.job_name, "launched_at": time.time()}
        _write_atomic(run_dir / "launch.json", json.dumps(launch) + "\n")
        argv = [
            sys.executable,
            "-I",
            "-S",
            str(WRAPPER),
            str(run_dir),
            request.job_name,
            "--",
            *request.command,
        ]
        try:
            child = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            raise BackendUnavailable(f"cannot start the local wrapper: {exc}") from exc
        # Reap the wrapper whenever it ends, so it never lingers as a zombie of this process.
        threading.Thread(target=child.wait, daemon=True).start()
        record = _wait_for_record(run_dir, child)
        if record is None:
            raise BackendUnavailable(
                f"the local wrapper exited with {child.returncode} before starting the command"
            )
        return SubmitReceipt(str(record["pid"]), f"local pid {record['pid']} in {run_dir}")

    def status(self, jobs: Sequence[JobRef]) -> dict[str, RemoteStatus]:
        return {job.job_name: _status_of(job) for job in jobs}

    def cancel(self, job: JobRef) -> None:
        job.run_dir.mkdir(parents=True, exist_ok=True)
        (job.run_dir / CANCEL_MARKER).touch()
        record = _read_json(job.run_dir / "job.json")
        if record and is_alive(int(record["pid"]), record.get("start_time")):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(record["pid"]), 15)

    def collect(self, job: JobRef) -> str:
        out, err = self.log_paths(job)
        sizes = [f"{p.name} {p.stat().st_size} bytes" for p in (out, err) if p.exists()]
        return f"logs in {job.run_dir}: " + (", ".join(sizes) or "none written")

    def log_paths(self, job: JobRef) -> tuple[Path, Path]:
        return job.run_dir / "stdout", job.run_dir / "stderr"

    def poll_interval(self, age_seconds: float) -> float:
        # A local check costs two stat() calls: poll fast so short jobs finish promptly.
        return 0.02 if age_seconds < 2 else 0.1 if age_seconds < 60 else 0.5


def _status_of(job: JobRef) -> RemoteStatus:
    directory = job.run_dir
    record = _read_json(directory / "job.json")
    if record is None:
        return _not_started(job)
    pid = int(record["pid"])
    alive = is_alive(pid, record.get("start_time"))
    # Read the marker after the liveness check: a wrapper that exits in between has written it.
    marker = _read_marker(directory / "exit_code")
    if marker is not None:
        cancelled = (directory / CANCEL_MARKER).exists() and marker != 0
        state = (
            RemoteState.CANCELLED
            if cancelled
            else RemoteState.COMPLETED
            if marker == 0
            else RemoteState.FAILED
        )
        return RemoteStatus(
            job.job_name,
            str(pid),
            state,
            exit_code=marker,
            cancelled_by="vibesys" if cancelled else None,
            observation=f"marker exit_code={marker}",
        )
    if alive:
        return RemoteStatus(
            job.job_name, str(pid), RemoteState.RUNNING, observation=f"pid {pid} alive, no marker"
        )
    return RemoteStatus(
        job.job_name,
        str(pid),
        RemoteState.UNKNOWN,
        observation=f"started as pid {pid}; process gone and no exit_code marker",
    )


def _not_started(job: JobRef) -> RemoteStatus:
    launch_file = job.run_dir / "launch.json"
    if not launch_file.exists():
        return RemoteStatus(
            job.job_name,
            None,
            RemoteState.NOT_FOUND,
            observation=f"no launch record in {job.run_dir}",
        )
    if _wrapper_running(job.job_name):
        return RemoteStatus(job.job_name, None, RemoteState.PENDING, observation="wrapper starting")
    age = time.time() - launch_file.stat().st_mtime
    if age < LAUNCH_GRACE_SECONDS:
        return RemoteStatus(
            job.job_name,
            None,
            RemoteState.PENDING,
            observation=f"launched {age:.1f}s ago, no job record yet",
        )
    # A marker without a record cannot happen: the record is written first.
    return RemoteStatus(
        job.job_name,
        None,
        RemoteState.NOT_FOUND,
        observation=f"launch record but no job record or wrapper after {age:.0f}s",
    )


def _wrapper_running(job_name: str) -> bool:
    """Whether a wrapper for `job_name` exists that has not yet written its record."""
    needle = f"\0{job_name}\0--\0".encode()
    wrapper = str(WRAPPER).encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as handle:
                cmdline = handle.read()
        except OSError:
            continue
        if wrapper in cmdline and needle in cmdline:
            return True
    return False


def _wait_for_record(run_dir: Path, child: subprocess.Popen[bytes]) -> dict[str, Any] | None:
    deadline = time.monotonic() + 30
    delay = 0.001
    while time.monotonic() < deadline:
        record = _read_json(run_dir / "job.json")
        if record is not None:
            return record
        if child.poll() is not None:
            return _read_json(run_dir / "job.json")
        time.sleep(delay)
        delay = min(delay * 2, 0.02)
    return None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError):
        return None
    return loaded if isinstance(loaded, dict) else None


def _read_marker(path: Path) -> int | None:
    try:
        return int(path.read_text(encoding="ascii").strip())
    except (FileNotFoundError, ValueError):
        return None


def _write_atomic(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
