"""Runs one command as a local "job" and leaves a completion marker. Stdlib only: it is started
by path (`python -I -S local_wrapper.py RUN_DIR JOB_NAME -- CMD...`), never imported by vibesys.

Contract (the same as the Slurm batch wrapper):
- `job.json` (pid, process start time, job name) is written atomically BEFORE the command
  starts, so its absence proves the command never started;
- `exit_code` is written atomically (temporary file, fsync, rename) after the command ends:
  the command's own status, or 128+N when signal N killed it (137 for SIGKILL);
- SIGTERM/SIGINT/SIGHUP to the wrapper are passed to the command's process group, and after a
  grace period the group is killed, so a cancel always ends with a marker.
"""

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
from pathlib import Path

GRACE_SECONDS = 5.0


def _write_atomic(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _start_time(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        stat = handle.read().decode("ascii", "replace")
    return stat[stat.rindex(")") + 2 :].split()[19]


def main(argv: list[str]) -> int:
    run_dir, job_name, separator, *command = argv[1:]
    if separator != "--" or not command:
        print("usage: local_wrapper.py RUN_DIR JOB_NAME -- CMD...", file=sys.stderr)
        return 2
    directory = Path(run_dir)
    stop = threading.Event()
    child: subprocess.Popen[bytes] | None = None

    def forward(signum: int, _frame: object) -> None:
        # Before the command starts, a signal only marks it as cancelled: it never starts.
        if stop.is_set():
            return
        stop.set()
        if child is None:
            return
        _signal_group(child.pid, signal.SIGTERM)

        def escalate() -> None:
            if child is not None and child.poll() is None:
                _signal_group(child.pid, signal.SIGKILL)

        threading.Timer(GRACE_SECONDS, escalate).start()

    # Handlers first: a cancel that arrives while the record is being written is not lost.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    pid = os.getpid()
    record = {
        "job_name": job_name,
        "pid": pid,
        "start_time": _start_time(pid),
        "host": socket.gethostname(),
        "started_at": time.time(),
    }
    _write_atomic(directory / "job.json", json.dumps(record) + "\n")
    with open(directory / "stdout", "ab") as out, open(directory / "stderr", "ab") as err:
        if stop.is_set():
            err.write(b"vibesys: cancelled before the command started\n")
            code = 128 + signal.SIGTERM
        else:
            try:
                child = subprocess.Popen(
                    command, stdin=subprocess.DEVNULL, stdout=out, stderr=err, process_group=0
                )
            except OSError as exc:
                err.write(f"vibesys: cannot start {command[0]!r}: {exc.strerror}\n".encode())
                code = 127 if isinstance(exc, FileNotFoundError) else 126
            else:
                if stop.is_set():  # the signal came between the check and the start
                    _signal_group(child.pid, signal.SIGTERM)
                returned = child.wait()
                code = 128 - returned if returned < 0 else returned
    # Whatever the command left behind in its group goes with it.
    if child is not None:
        _signal_group(child.pid, signal.SIGKILL)
    _write_atomic(directory / "exit_code", f"{code}\n")
    os._exit(0)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
