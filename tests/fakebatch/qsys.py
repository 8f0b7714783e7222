"""A tiny batch system for tests: `python qsys.py STATE COMMAND ...` over a state directory.

    submit NAME ATTEMPT_DIR -- ARGV...   start ARGV detached, its output in ATTEMPT_DIR; print
                                         its id (with a `freeze` file in STATE: the command
                                         freezes and the job starts late, once a `release`
                                         file appears)
    status                               one line per job: "ID NAME running|ended|cancelled"
    cancel NAME                          kill every job of that name (its process group)

The job script is the remote attempt directory's protocol (the claim, the exit code marker),
written by the adapter and passed as ARGV; this system only starts, lists and kills
processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def _jobs(state: Path) -> list[dict[str, object]]:
    found = []
    for path in sorted(state.glob("*.json"), key=lambda p: int(p.stem)):
        job = json.loads(path.read_text())
        job["id"] = path.stem
        found.append(job)
    return found


def _alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def submit(state: Path, name: str, attempt_dir: str, argv: list[str]) -> None:
    job_id = str(len(list(state.glob("*.json"))) + 1)
    Path(attempt_dir).mkdir(parents=True, exist_ok=True)
    with (
        open(Path(attempt_dir, "stdout"), "ab") as out,
        open(Path(attempt_dir, "stderr"), "ab") as err,
    ):
        env = {**os.environ, "QSYS_JOB_ID": job_id}
        proc = subprocess.Popen(
            argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, start_new_session=True
        )
    Path(state, f"{job_id}.json").write_text(json.dumps({"name": name, "pid": proc.pid}))
    print(job_id)


def late(state: Path, name: str, attempt_dir: str, argv: list[str]) -> None:
    """A submission the system accepts late: after the submitter gave up on its answer."""
    deadline = time.monotonic() + 60  # a test that failed never releases it
    while not Path(state, "release").exists():
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)
    submit(state, name, attempt_dir, argv)


def status(state: Path) -> None:
    for job in _jobs(state):
        word = "running" if _alive(int(str(job["pid"]))) else "ended"
        if job.get("cancelled"):
            word = "cancelled" if word == "ended" else word
        print(f"{job['id']} {job['name']} {word}")


def cancel(state: Path, name: str) -> None:
    for job in _jobs(state):
        if job["name"] == name:
            with_mark = {k: v for k, v in job.items() if k != "id"} | {"cancelled": True}
            Path(state, f"{job['id']}.json").write_text(json.dumps(with_mark))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(str(job["pid"])), signal.SIGKILL)


def main(args: list[str]) -> int:
    state, command, *rest = args
    Path(state).mkdir(parents=True, exist_ok=True)
    if command in ("submit", "late"):
        name, attempt_dir, dashes, *argv = rest
        assert dashes == "--"
        freeze = Path(state, "freeze")
        if command == "submit" and freeze.exists():
            freeze.unlink()
            later = [sys.executable, __file__, state, "late", *rest]
            subprocess.Popen(later, start_new_session=True, stdout=subprocess.DEVNULL)
            os.kill(os.getpid(), signal.SIGSTOP)  # frozen until whoever waits gives up
        (late if command == "late" else submit)(Path(state), name, attempt_dir, argv)
    elif command == "status":
        status(Path(state))
    elif command == "cancel":
        cancel(Path(state), rest[0])
    else:
        print(f"qsys: unknown command {command!r}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
