"""The embedded default: each job is a local process in its own session, so it outlives the
`vibesys` process that started it, exactly as a remote job would.

Files in the local attempt directory (the job's attempt directory here):
- `launch.json`       written by the adapter before it spawns anything (its own intent);
- `claim`             linked by the wrapper before the command starts (pid, start time), or by
                      the engine's fence; whoever links it first owns the attempt;
- `group`             the command's process group and the wrapper's session, written as soon
                      as the command starts;
- `stdout`, `stderr`, and `exit_code` (the atomic completion marker, written once nothing the
                      command started runs: the wrapper is their subreaper and kills them all);
- `survivors`         instead of the marker: processes the wrapper killed but could not reap;
- `cancel_requested`  written before a cancel signal is sent; `refused` by a fenced wrapper.

Reading rule: marker → finished with that code; the job's claim and its wrapper (or what is
left of the job: `local_leftovers`) alive → running; a fence → the command never runs; no
claim and no launch → never started; launched long ago and never claimed → NOT_FOUND (only a
fence proves it dead); claimed, everything gone, no marker → UNKNOWN (never success), unless a
cancel was requested: then nothing of it runs, which is what a cancel must prove.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from vibesys.adapters.base import (
    TERMINAL_REMOTE,
    Backend,
    JobRef,
    RemoteState,
    RemoteStatus,
    Submission,
    SubmitReceipt,
)
from vibesys.adapters.local_leftovers import left_running
from vibesys.adapters.local_request import LocalRequest, confined_argv
from vibesys.adapters.rundir.claim import Claim, parse_claim
from vibesys.adapters.rundir.names import CANCEL_FILE, CLAIM_FILE, EXIT_CODE_FILE
from vibesys.adapters.transports.base import map_transport_errors
from vibesys.errors import BackendMisconfigured, BackendUnavailable, SubmitRejected
from vibesys.osutil.layout import log_paths
from vibesys.osutil.proc import caller_ignores, is_alive, processes

WRAPPER = Path(__file__).with_name("local_wrapper.py")
#: The signals the wrapper handles (and passes on to the command's group).
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: How long a launched wrapper may take to claim its attempt before it counts as lost (and the
#: engine may fence it). Generous: a loaded host can take seconds to start Python.
LAUNCH_GRACE_SECONDS = 10.0
#: How long a repeated cancel waits after the first before it kills the command's group.
KILL_AFTER_SECONDS = 5.0


#: The registry's name for this adapter's request model.
Request = LocalRequest


def make_request(adapter: str, values: Mapping[str, Any]) -> LocalRequest:
    return LocalRequest()


def build(request: LocalRequest) -> LocalBackend:
    return LocalBackend()


class LocalBackend(Backend):
    name = "local"

    # -- what the engine may ask of it (adapters.base.Backend) ---------------------------

    def sees_its_own_end(self) -> LocalBackend:
        return self

    def __init__(self, launch_grace: float = LAUNCH_GRACE_SECONDS) -> None:
        self.launch_grace = launch_grace
        #: the wrappers this process started, by job name: set once each has ended
        self._wrappers: dict[str, threading.Event] = {}

    def submit(self, submission: Submission[Any]) -> SubmitReceipt:
        if not submission.command:
            raise SubmitRejected("empty command")
        cwd = submission.context.cwd
        if not Path(cwd).is_dir():
            raise BackendMisconfigured(
                f"the recorded working directory {cwd} does not exist any more",
                fix=f"recreate {cwd}, or run the command again from an existing directory",
            )
        attempt_dir = submission.attempt_dir
        attempt_dir.mkdir(parents=True, exist_ok=True)
        command = list(submission.command)
        confine = getattr(submission.request, "confine", None)
        if confine is not None:  # as recorded: a retry is confined as its first attempt was
            command = confined_argv(confine, command, cwd, submission.context.env, attempt_dir)
        launch = {"job_name": submission.job_name, "launched_at": time.time()}
        _write_atomic(attempt_dir / "launch.json", json.dumps(launch) + "\n")
        argv = [sys.executable, "-I", "-S", str(WRAPPER), str(attempt_dir), submission.job_name]
        # The wrapper handles these itself; the command gets them ignored if our caller did.
        ignored = [str(int(s)) for s in FORWARDED if caller_ignores(s)]
        argv += [f"--ignore={','.join(ignored)}"] if ignored else []
        # The wrapper says on this pipe when it has claimed (or closes it by ending): no polling.
        claimed, notify = os.pipe()
        argv += [f"--notify={notify}", "--"]
        try:
            with map_transport_errors("start the local wrapper", maybe_effect=False):
                child = subprocess.Popen(
                    [*argv, *command],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=(notify,),
                    cwd=cwd,
                    env=dict(submission.context.env),
                )
        except BaseException:
            os.close(claimed)
            raise
        finally:
            os.close(notify)
        # Reap the wrapper whenever it ends, so it never lingers as a zombie of this process,
        # and say so: the driver then reads the job's end at once (`ended_here`).
        ended = self._wrappers[submission.job_name] = threading.Event()
        threading.Thread(target=_reap, args=(child, ended), daemon=True).start()
        with open(claimed, "rb", buffering=0) as pipe:
            claim = _wait_for_claim(attempt_dir, pipe, self.launch_grace / 2)
        if claim is not None and claim.kind == "job":
            pid = claim.get("pid")
            return SubmitReceipt(pid, f"local pid {pid} in {attempt_dir}")
        # A fence, a refusal or a stalled wrapper: the attempt's fate is for the engine to
        # settle (by lookup, or by a fence), never by launching another wrapper.
        why = claim.describe() if claim else f"no claim yet (wrapper exit {child.poll()})"
        raise BackendUnavailable(
            f"the local wrapper did not start the job: {why}", maybe_submitted=True
        )

    def status(self, jobs: Sequence[JobRef]) -> dict[str, RemoteStatus]:
        return {job.job_name: self._status_of(job) for job in jobs}

    def end_signal(self, job: JobRef) -> threading.Event | None:
        return self._wrappers.get(job.job_name)

    def ended_here(self, job: JobRef) -> RemoteStatus | None:
        """The wrapper this process started has ended: the job's status, read as always,
        when it shows the end (the marker); else the next look decides."""
        ended = self._wrappers.get(job.job_name)
        if ended is None or not ended.is_set():
            return None
        status = self._status_of(job)
        return status if status.state in TERMINAL_REMOTE else None

    def cancel(self, job: JobRef) -> None:
        job.attempt_dir.mkdir(parents=True, exist_ok=True)
        marker = job.attempt_dir / CANCEL_FILE
        try:
            # A cancel repeated after the grace period kills: the first one only asked.
            late = time.time() - marker.stat().st_mtime >= KILL_AFTER_SECONDS
        except FileNotFoundError:
            late = False
            marker.touch()
        claim = _read_claim(job.attempt_dir)
        if claim is None or claim.kind != "job":
            _kill_unclaimed_wrappers(job.job_name, signal.SIGTERM)
            return
        pid, started = int(claim.get("pid") or 0), claim.get("start_time") or None
        if pid and is_alive(pid, started):
            # The wrapper forwards the signal to the command's group and escalates itself.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            return
        # The supervisor is gone: signal what is left directly, harder the second time.
        for member in left_running(job.attempt_dir, claim):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(member, signal.SIGKILL if late else signal.SIGTERM)

    def fence(self, job: JobRef, text: str) -> Claim:
        directory = job.attempt_dir
        directory.mkdir(parents=True, exist_ok=True)
        temporary = directory / f"{CLAIM_FILE}.fence.{os.getpid()}.tmp"
        temporary.write_text(text, encoding="utf-8")
        with contextlib.suppress(FileExistsError):
            os.link(temporary, directory / CLAIM_FILE)
        temporary.unlink()
        claim = _read_claim(directory)
        if claim is None:
            raise BackendUnavailable(f"fence: {directory / CLAIM_FILE} is unreadable")
        if claim.fenced:
            # The wrapper can never run now; do not let a stalled one linger.
            _kill_unclaimed_wrappers(job.job_name, signal.SIGKILL)
        return claim

    def collect(self, job: JobRef) -> str:
        out, err = self.log_paths(job)
        sizes = [f"{p.name} {p.stat().st_size} bytes" for p in (out, err) if p.exists()]
        return f"logs in {job.attempt_dir}: " + (", ".join(sizes) or "none written")

    def log_paths(self, job: JobRef) -> tuple[Path, Path]:
        return log_paths(job.attempt_dir)

    def poll_interval(self, age_seconds: float) -> float:
        # A local check costs a few stat() calls: poll fast so short jobs finish promptly.
        return 0.02 if age_seconds < 2 else 0.1 if age_seconds < 60 else 0.5

    def _status_of(self, job: JobRef) -> RemoteStatus:
        directory = job.attempt_dir
        claim = _read_claim(directory)
        if claim is None:
            return self._not_claimed(job)
        if claim.fenced:
            return RemoteStatus(
                job.job_name, None, RemoteState.NOT_FOUND, observation=claim.describe(), claim=claim
            )
        pid = int(claim.get("pid") or 0)
        alive = is_alive(pid, claim.get("start_time") or None)
        # Read the marker after the liveness check: a wrapper that exits in between wrote it.
        marker = _read_marker(directory / EXIT_CODE_FILE)
        cancelled = (directory / CANCEL_FILE).exists()
        ran = _provenance(claim, directory / EXIT_CODE_FILE if marker is not None else None)
        if marker is not None:
            stopped = cancelled and marker != 0
            state = (
                RemoteState.CANCELLED
                if stopped
                else RemoteState.COMPLETED
                if marker == 0
                else RemoteState.FAILED
            )
            return RemoteStatus(
                job.job_name,
                str(pid),
                state,
                exit_code=marker,
                cancelled_by="vibesys" if stopped else None,
                observation=f"marker exit_code={marker}",
                provenance=ran,
            )
        if alive:
            return RemoteStatus(
                job.job_name,
                str(pid),
                RemoteState.RUNNING,
                observation=f"pid {pid} alive",
                provenance=ran,
            )
        members = left_running(directory, claim)
        if members:
            return RemoteStatus(
                job.job_name,
                str(pid),
                RemoteState.RUNNING,
                observation=f"wrapper {pid} gone; {len(members)} processes of the job still "
                f"run ({', '.join(map(str, members[:5]))})",
                provenance=ran,
            )
        if cancelled:
            return RemoteStatus(
                job.job_name,
                str(pid),
                RemoteState.CANCELLED,
                cancelled_by="vibesys",
                observation=f"cancel requested; wrapper {pid} gone without a marker and "
                "nothing of the job runs",
                provenance=ran,
            )
        return RemoteStatus(
            job.job_name,
            str(pid),
            RemoteState.UNKNOWN,
            observation=f"started as pid {pid}; process gone and no exit_code marker",
            claim=claim,
            final=True,
            provenance=ran,
        )

    def _not_claimed(self, job: JobRef) -> RemoteStatus:
        launch_file = job.attempt_dir / "launch.json"
        try:
            age = time.time() - launch_file.stat().st_mtime
        except FileNotFoundError:
            return RemoteStatus(
                job.job_name,
                None,
                RemoteState.NOT_FOUND,
                observation=f"no launch record in {job.attempt_dir}",
            )
        if age < self.launch_grace:
            return RemoteStatus(
                job.job_name,
                None,
                RemoteState.PENDING,
                observation=f"launched {age:.1f}s ago, not yet claimed",
            )
        wrapper = "a wrapper process exists" if _wrapper_pids(job.job_name) else "no wrapper"
        return RemoteStatus(
            job.job_name,
            None,
            RemoteState.NOT_FOUND,
            observation=f"launched {age:.0f}s ago and never claimed ({wrapper})",
        )


def _provenance(claim: Claim, marker: Path | None) -> dict[str, str]:
    """Where the attempt ran, from its claim (host, the wrapper's pid, when it started) and,
    once it ended, when its exit marker was written."""
    found = {"host": claim.get("host"), "pid": claim.get("pid"), "start": claim.get("started_at")}
    if marker is not None:
        with contextlib.suppress(OSError):
            ended = datetime.fromtimestamp(marker.stat().st_mtime, UTC)
            found["end"] = ended.isoformat()
    return {key: value for key, value in found.items() if value}


def _wrapper_pids(job_name: str) -> list[int]:
    """Wrappers for `job_name` that still run (any of them may be stopped, not dead)."""
    needle = f"\0{job_name}\0".encode()  # the wrapper's options may follow its job name
    wrapper = str(WRAPPER).encode()
    return [
        pid for pid, cmdline in processes("cmdline") if wrapper in cmdline and needle in cmdline
    ]


def _kill_unclaimed_wrappers(job_name: str, signum: int) -> None:
    for pid in _wrapper_pids(job_name):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def _reap(child: subprocess.Popen[bytes], ended: threading.Event) -> None:
    child.wait()
    ended.set()


def _wait_for_claim(attempt_dir: Path, pipe: BinaryIO, seconds: float) -> Claim | None:
    """The claim once the wrapper has written its line (or ended); None when it says nothing
    for `seconds` (stalled, or a host too loaded to start it): what the attempt is, is then
    the engine's to settle."""
    ready, _, _ = select.select([pipe], [], [], seconds)
    return _read_claim(attempt_dir) if ready else None


def _read_claim(directory: Path) -> Claim | None:
    try:
        return parse_claim((directory / CLAIM_FILE).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


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
