"""Runs one command as a local "job" and leaves a completion marker. Stdlib only: it is started
by path (`python -I -S local_wrapper.py RUN_DIR JOB_NAME -- CMD...`), never imported by vibesys.

Contract (the same as the Slurm wrappers, see `vibesys.adapters.rundir.claim`):
- `claim` is linked into place atomically BEFORE the command starts (pid, process start time,
  host). If a claim exists already (the engine's fence, or another wrapper), nothing runs: the
  wrapper leaves `refused` and exits 85;
- a cancel requested before the command starts (`cancel_requested`, or a signal) stops it from
  starting;
- `group` records the command's process group (its leader's pid and start time) as soon as it
  starts, so a cancel can reach the command even if this wrapper is killed;
- `exit_code` is written atomically (temporary file, fsync, rename) after the command ends:
  the command's own status, or 128+N when signal N killed it (137 for SIGKILL);
- SIGTERM/SIGINT/SIGHUP to the wrapper are passed to the command's process group, and after a
  grace period the group is killed, so a cancel always ends with a marker. Those of them that
  vibesys's caller ignores (`--ignore=N,...`) the command starts with ignored, as it would
  have had it run directly; every other signal disposition, limit, namespace, cgroup,
  capability and affinity it inherits unchanged.
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
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

GRACE_SECONDS = 5.0
REFUSED_EXIT = 85
#: Test hook: `VIBESYS_STALL=first_wrapper_before_claim` stops the first attempt's wrapper
#: (SIGSTOP) just before it claims, the way a frozen node or an overloaded host would; later
#: attempts, which inherit the same recorded environment, run normally.
STALL_ENV = "VIBESYS_STALL"


def _write_atomic(path: Path, text: str) -> None:
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _claim(directory: Path, text: str) -> bool:
    """Link a complete claim into place; False when the attempt is claimed already."""
    temporary = directory / f"claim.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.link(temporary, directory / "claim")
    except FileExistsError:
        return False
    finally:
        temporary.unlink()
    _fsync_dir(directory)
    return True


def _start_time(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        stat = handle.read().decode("ascii", "replace")
    return stat[stat.rindex(")") + 2 :].split()[19]


def _stall_if_asked(point: str, directory: Path) -> None:
    if point in os.environ.get(STALL_ENV, "").split(",") and directory.name == "1":
        os.kill(os.getpid(), signal.SIGSTOP)


def _refuse(directory: Path) -> int:
    try:
        holder = (directory / "claim").read_text(encoding="utf-8", errors="replace")
    except OSError:
        holder = "(unreadable)\n"
    _write_atomic(
        directory / "refused",
        "vibesys: this attempt is claimed by someone else; nothing was run\n" + holder,
    )
    return REFUSED_EXIT


def main(argv: list[str]) -> int:
    run_dir, job_name, separator, *command = argv[1:]
    ignored: list[int] = []
    if separator.startswith("--ignore="):
        ignored = [int(s) for s in separator.partition("=")[2].split(",")]
        separator, *command = command
    if separator != "--" or not command:
        print(
            "usage: local_wrapper.py RUN_DIR JOB_NAME [--ignore=N,...] -- CMD...", file=sys.stderr
        )
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

    # Handlers first: a cancel that arrives while the claim is being written is not lost.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    _stall_if_asked("first_wrapper_before_claim", directory)
    pid = os.getpid()
    record = {
        "kind": "job",
        "job_name": job_name,
        "pid": pid,
        "start_time": _start_time(pid),
        "host": socket.gethostname(),
        # As precise as the journal's own times, so the attempt's start never reads as before
        # the invocation was recorded.
        "started_at": datetime.now(UTC).isoformat(),
    }
    if not _claim(directory, "".join(f"{k}={v}\n" for k, v in record.items())):
        os._exit(_refuse(directory))
    with open(directory / "stdout", "ab") as out, open(directory / "stderr", "ab") as err:
        if stop.is_set() or (directory / "cancel_requested").exists():
            err.write(b"vibesys: cancelled before the command started\n")
            code = 128 + signal.SIGTERM
        else:
            try:
                child = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    process_group=0,
                    preexec_fn=_ignoring(ignored) if ignored else None,
                )
            except OSError as exc:
                err.write(f"vibesys: cannot start {command[0]!r}: {exc.strerror}\n".encode())
                code = 127 if isinstance(exc, FileNotFoundError) else 126
            else:
                group = {"pgid": child.pid, "start_time": _start_time(child.pid)}
                _write_atomic(directory / "group", json.dumps(group) + "\n")
                if stop.is_set():  # the signal came between the check and the start
                    _signal_group(child.pid, signal.SIGTERM)
                returned = child.wait()
                code = 128 - returned if returned < 0 else returned
    # Whatever the command left behind in its group goes with it.
    if child is not None:
        _signal_group(child.pid, signal.SIGKILL)
    _write_atomic(directory / "exit_code", f"{code}\n")
    os._exit(0)


def _ignoring(signals: list[int]) -> Callable[[], None]:
    """Run in the command's process before it starts: the signals its caller ignored (which
    this wrapper handles, so they reach the command as default otherwise) stay ignored."""

    def ignore() -> None:
        for signum in signals:
            signal.signal(signum, signal.SIG_IGN)

    return ignore


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
