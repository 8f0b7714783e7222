"""The one place the broker meets the engine: a `GpuJobRunner` that runs each accepted GPU
command as a journaled invocation of the `srun` adapter.

Its stable name `<job_name_prefix>-<invocation>-<attempt>` is committed before srun runs, the
attempt is claimed (and, when its submission is ambiguous, fenced) like any other, it is driven
to its end, and cancelled through the engine when the client goes away. After a crash of the
broker, `vibesys reconcile` on the same journal finds the job by that name.

The agent's variables never reach the journal, a command line or srun's own environment (where
`BASH_ENV` or `LD_PRELOAD` would act outside the sandbox): they go to an owner-only file in the
remote invocation directory (the parent of its remote attempt directories, on the shared file
system), which the node-side prelude reads into the sandbox. The job's output is copied to the
client from srun's files as it grows, independently of the engine's status polling.

A profiled command's captures are the request's declared artifacts (recorded at PREPARED with
the command that writes them): the engine collects them once the job ended, verified (size,
sha256) into the invocation's local attempt directory, and the runner sends each one that is
verified to the client, with its digest, before the exit status. The captures left in the
job's directory are the runtime's: removed only once the invocation is DONE (its job proven
gone, so nothing writes them any more), whoever stopped it; an UNRESOLVED job's stay, with the
job, until a broker that carries it on (`settle`) proves it gone.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Final

from vibesys.adapters.requests import RecordedSite
from vibesys.adapters.rundir.names import STDERR_FILE, STDOUT_FILE, WORK_DIR
from vibesys.adapters.slurm.request import SrunRequest
from vibesys.broker.jobs import GpuJob, OutputSink, StopSignal
from vibesys.config.load import recorded_slurm
from vibesys.engine import DriveOptions, Engine, RetryPolicy, drive, new_invocation_id
from vibesys.engine.cancel import cancel_at_deadline
from vibesys.engine.drive import StopFlag
from vibesys.job_result import EXIT_STATUS, TIMEOUT_CANCEL, JobStatus, timed_out
from vibesys.journal_schema import ArtifactState, Invocation, Journal, open_journal
from vibesys.osutil.sandbox import confined_command, env_file_bytes
from vibesys.states import JobState, Outcome
from vibesys.states.exits import exit_status

__all__ = ["FOLLOW_SECONDS", "EngineGpuJobRunner"]

#: How often the job's output files are read while it runs.
FOLLOW_SECONDS: Final = 0.1
_CHUNK: Final = 1 << 16
_STREAMS: Final = (("stdout", STDOUT_FILE), ("stderr", STDERR_FILE))
AGENT_ENV_FILE: Final = "agent.env"


class EngineGpuJobRunner:
    """`site` is the broker's own rendering of its site file (kept in `site_file`, its state
    directory's slurm-operator.toml, read once at start): every job is recorded with it."""

    def __init__(self, journal_path: Path, site: RecordedSite, site_file: Path) -> None:
        self.journal_path = journal_path
        self.site = site
        self.site_file = site_file
        self.remote_root = Path(recorded_slurm(site).slurm.remote_workspace_root)

    def run(self, job: GpuJob, output: OutputSink, stop: StopSignal) -> int:
        # One connection per job: SQLite connections stay in the thread that opened them.
        journal = open_journal(self.journal_path)
        try:
            # An agent's command is never re-run on its behalf: a node failure is reported.
            engine = Engine(journal, retry=RetryPolicy(max_retries=0))
            request = SrunRequest(
                site_config=str(self.site_file),
                site_record=self.site,
                gpus=job.gpus,
                time_minutes=job.time_minutes,
                partitions=job.partitions,
                job_name_prefix=job.job_name_prefix,
                artifacts=job.captures,
            )
            invocation_id = new_invocation_id()
            env_file = _write_agent_env(self.remote_root / invocation_id, job)
            inv = engine.prepare(
                adapter="srun",
                command=list(confined_command(job.sandbox, job.argv, str(env_file))),
                request=request,
                label="vibesys-gpu",
                max_retries=0,
                invocation_id=invocation_id,
                # Its client goes with the broker: reconcile cancels it instead of following.
                cancel_when_orphaned=True,
            )
            if job.slot is not None:
                job.slot.bind(inv.id)  # before anything is submitted
            follower = _Follower(self.remote_root / inv.id, output)  # its remote attempt dirs
            follower.start()
            ended = threading.Event()
            if job.timeout_seconds is not None:
                by = f"{TIMEOUT_CANCEL} {job.timeout_seconds} s"
                cancel_at_deadline(self.journal_path, inv.id, job.timeout_seconds, ended, by)
            try:
                inv = drive(engine, inv, DriveOptions(interrupt=_Bridge(stop)))
            finally:
                ended.set()
                follower.finish()
            if job.captures and not stop.is_set():
                _send_captures(journal, inv, output)
            self._release_captures(inv, engine.adapters.request_of(inv).artifacts)
            return _report(journal, inv, output)
        finally:
            journal.close()

    def settle(self, invocation_id: str, stop: StopSignal) -> bool:
        """Carry on a GPU job whose broker died (its slot under the run's cap is still held):
        cancel it (its client is gone with that broker) and drive it until Slurm shows it
        ended. False when another live process drives it, or its end cannot be proven yet."""
        journal = open_journal(self.journal_path)
        try:
            engine = Engine(journal, retry=RetryPolicy(max_retries=0))
            if not journal.leases.acquire_lease(invocation_id, engine.owner, engine.lease_ttl):
                return False
            inv = journal.invocations.get(invocation_id)
            if inv.state is not JobState.DONE:
                inv = engine.request_cancel(inv, "broker: the broker that ran it died")
                inv = drive(engine, inv, DriveOptions(interrupt=_Bridge(stop)))
            self._release_captures(inv, engine.adapters.request_of(inv).artifacts)
            return inv.state is JobState.DONE
        finally:
            journal.close()

    def _release_captures(self, inv: Invocation, captures: tuple[str, ...]) -> None:
        """Remove the captures (the request's artifacts, as recorded) from the job's
        directories once the invocation is DONE; any other state keeps them."""
        if inv.state is not JobState.DONE or not captures:
            return
        for attempt in range(1, inv.attempt + 1):
            work = self.remote_root / inv.id / str(attempt) / WORK_DIR
            for pattern in captures:
                for path in work.glob(pattern):
                    if not path.is_dir() or path.is_symlink():
                        path.unlink(missing_ok=True)


def _write_agent_env(directory: Path, job: GpuJob) -> Path:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / AGENT_ENV_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(env_file_bytes(job.sandbox))
        handle.flush()
        os.fsync(handle.fileno())
    return path


def _send_captures(journal: Journal, inv: Invocation, output: OutputSink) -> None:
    """Each capture the engine brought home verified, as recorded (read back, never listed
    again); what did not come home is said on stderr."""
    for row in journal.progress.artifacts(inv.id):
        name = Path(row.path).name
        if row.state not in (ArtifactState.VERIFIED, ArtifactState.ACKNOWLEDGED):
            detail = f": {row.detail}" if row.detail else ""
            output.write(
                "stderr", f"[vibesys-gpu] capture {row.path} {row.state}{detail}\n".encode()
            )
            continue
        assert row.local_path is not None and row.size is not None and row.sha256 is not None
        with open(row.local_path, "rb") as handle:
            while chunk := handle.read(_CHUNK):
                output.capture(name, chunk)
        output.captured(name, row.size, row.sha256)


def _report(journal: Journal, inv: Invocation, output: OutputSink) -> int:
    """The client's exit status; for anything but the command's own end, the reason too. A
    command its timeout ended exits 124 (as `timeout(1)`'s), TIMEOUT."""
    status = exit_status(inv)
    ran = inv.state is JobState.DONE and inv.outcome in (
        Outcome.COMPLETED,
        Outcome.APPLICATION_FAILED,
    )
    if not ran:
        history = journal.invocations.history(inv.id)
        last = history[-1]
        why = "; ".join(str(v) for v in last.evidence.values() if v not in ("", None))
        what = str(inv.outcome or inv.state)
        if inv.outcome is Outcome.CANCELLED and timed_out(history):
            what, status = JobStatus.TIMEOUT, EXIT_STATUS[JobStatus.TIMEOUT]
        output.write("stderr", f"[vibesys-gpu] {what} ({inv.id}): {why}\n".encode())
    return status


class _Bridge(StopFlag):
    """The engine's stop flag, also set by the server's signal (the client went away)."""

    def __init__(self, stop: StopSignal) -> None:
        super().__init__()
        self._stop = stop

    def is_set(self) -> bool:
        return super().is_set() or self._stop.is_set()

    def wait(self, timeout: float) -> bool:
        return self._stop.wait(timeout) or super().is_set()


class _Follower:
    """Copies what the job's output files gain to the sink, in a thread of its own (from its
    remote attempt directories `<remote invocation directory>/<attempt>`)."""

    def __init__(self, remote_invocation_dir: Path, output: OutputSink) -> None:
        self._dir = remote_invocation_dir
        self._output = output
        self._offsets: dict[Path, int] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="vibesys-gpu-follow", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def finish(self) -> None:
        self._done.set()
        self._thread.join()
        self._pump()  # whatever arrived after the last round

    def _loop(self) -> None:
        while not self._done.wait(FOLLOW_SECONDS):
            self._pump()

    def _pump(self) -> None:
        attempt = 1
        while (directory := self._dir / str(attempt)).is_dir():
            for stream, name in _STREAMS:
                self._copy(directory / name, stream)
            attempt += 1

    def _copy(self, path: Path, stream: str) -> None:
        offset = self._offsets.get(path, 0)
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                while chunk := handle.read(_CHUNK):
                    self._output.write("stdout" if stream == "stdout" else "stderr", chunk)
                    offset += len(chunk)
        except FileNotFoundError:
            return
        self._offsets[path] = offset
