"""The srun adapter: the agent's foreground GPU commands on a submit node (local transport).

srun runs in its own session with its output going to files in the attempt's directory, so it
survives the death of `vibesys run` exactly like a batch job; vibesys streams those files. The
job is named before it starts, so a crashed run is found again by that name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from msgspec import Struct

from vibesys.adapters.base import JobRef, RemoteState, RemoteStatus, Submission, SubmitReceipt
from vibesys.adapters.rundir.claim import Claim, parse_claim
from vibesys.adapters.rundir.markers import NO_MARKERS, read_here
from vibesys.adapters.rundir.names import (
    CLAIM_FILE,
    STDERR_FILE,
    STDOUT_FILE,
    WORK_DIR,
)
from vibesys.adapters.slurm.backend import SlurmBackend
from vibesys.adapters.slurm.parse import parse_squeue, squeue_argv
from vibesys.adapters.slurm.partitions import choose_partition, parse_windows
from vibesys.adapters.slurm.request import SrunRequest, make_request
from vibesys.adapters.slurm.script import srun_argv
from vibesys.adapters.slurm.site_parse import parse_sinfo_partitions, sinfo_argv
from vibesys.adapters.slurm.submission import REJECTIONS, job_spec, stage_candidate
from vibesys.adapters.transports import LocalTransport
from vibesys.config.slurm import SlurmSiteConfig
from vibesys.errors import BackendUnavailable, ConfigError, SubmitRejected
from vibesys.osutil.proc import processes

#: How squeue shows a time (its `%S` and `%e`): local time, to the second.
SQUEUE_TIME = "%Y-%m-%dT%H:%M:%S"
#: How often, while srun waits for its allocation, squeue is asked whether the job exists.
_LOOKUP_EVERY = 0.5


class SrunBackend(SlurmBackend):
    name = "srun"

    # -- what the engine may ask of it (adapters.base.Backend) ---------------------------

    def sees_its_own_end(self) -> SrunBackend:
        return self

    def __init__(self, config: SlurmSiteConfig, runner: LocalTransport | None = None) -> None:
        transport = config.slurm.transport
        if transport.kind != "local":
            raise ConfigError('slurm.transport.kind: the srun adapter needs kind = "local"')
        self.transport = runner or LocalTransport(transport.shell_command)
        super().__init__(config, self.transport)
        #: the srun processes this process started, by job name
        self._launched: dict[str, _Launched] = {}

    def _choose(self, request: SrunRequest) -> tuple[str, ...]:
        """The partition for this request, or the request's own (already checked) choice."""
        wanted = request.partitions
        agent = self.config.agent_gpu
        if not wanted:
            return ()
        ahead = _SINFO_AHEAD.pop(request.site_config, None)
        text = ahead.answer(self.config.slurm.command_timeout_seconds) if ahead else None
        limits = parse_sinfo_partitions(text or self._checked(sinfo_argv()))
        command = agent.windows_command if agent else None

        def windows() -> dict[str, bool]:
            assert command is not None
            try:
                code, out, _, _ = self._run(command)
            except BackendUnavailable:
                return {}
            return parse_windows(out) if code == 0 else {}

        chosen, _why = choose_partition(
            wanted, request.time_minutes, limits, windows if command else None
        )
        return (chosen,)

    def submit(self, submission: Submission[SrunRequest]) -> SubmitReceipt:
        remote = self.dirs.remote_attempt_dir(submission.job_ref())
        agent = self.config.agent_gpu
        extra = agent.srun_arguments if agent else ()
        spec = job_spec(submission, remote, extra, partitions=self._choose(submission.request))
        spec = stage_candidate(self, submission, spec)
        local = Path(str(remote))
        (local / WORK_DIR).mkdir(parents=True, exist_ok=True)
        with open(local / STDOUT_FILE, "ab") as out, open(local / STDERR_FILE, "ab") as err:
            process = self.transport.popen(
                srun_argv(spec), stdout=out, stderr=err, env=submission.context.env
            )
        only = spec.partitions[0] if len(spec.partitions) == 1 else None
        launched = _Launched(process, threading.Event(), only)
        self._launched[submission.job_name] = launched
        threading.Thread(target=launched.reap, daemon=True).start()
        return self._await_job(submission.job_name, local, process)

    def end_signal(self, job: JobRef) -> threading.Event | None:
        launched = self._launched.get(job.job_name)
        return None if launched is None else launched.ended

    def ended_here(self, job: JobRef) -> RemoteStatus | None:
        """srun returns once the job step has ended, and the step's wrapper leaves the
        command's status in `exit_code` before that: the job's claim and that marker are its
        outcome (as a status round would conclude), at once rather than at the next round. A
        job that left no marker (killed, out of time, its node lost) is the rounds' to tell."""
        launched = self._launched.get(job.job_name)
        if launched is None or not launched.ended.is_set():
            return None
        directory = str(self.dirs.remote_attempt_dir(job))
        found = read_here({directory: job.job_name}, times=True).get(job.job_name, NO_MARKERS)
        claim, code = found.claim, found.exit_code
        if claim is None or claim.kind != "job" or code is None:
            return None
        claimer = claim.get("slurm_job_id")
        if job.job_id is not None and claimer != str(job.job_id):
            return None  # another job holds the attempt: the rounds follow that one
        where = {
            "site": self.config.slurm.name,
            "slurm_job_id": claimer,
            "partition": claim.get("slurm_partition") or launched.partition or "",
            "nodes": claim.get("slurm_node"),
            "cpus": claim.get("slurm_cpus"),
            # In squeue's own form (local time), as the rounds record them.
            "start": _local_time(claim.get("started_at")),
            "end": _local_epoch(found.exit_written_at),
        }
        return RemoteStatus(
            job.job_name,
            claimer,
            RemoteState.COMPLETED if code == 0 else RemoteState.FAILED,
            exit_code=code,
            observation=f"srun exited {launched.process.returncode}; marker exit_code={code}; "
            f"{claim.describe()}",
            provenance={k: v for k, v in where.items() if v},
        )

    def fence(self, job: JobRef, text: str) -> Claim:
        claim = super().fence(job, text)
        if claim.fenced:
            # A stalled srun of this attempt would only ask for an allocation to be refused:
            # end it here (the same host: the srun adapter needs the local transport).
            _kill_local_srun(job.job_name)
        return claim

    def _await_job(self, name: str, local: Path, process: subprocess.Popen[bytes]) -> SubmitReceipt:
        """Return once the scheduler knows the job: it started, or squeue lists it."""
        deadline = time.monotonic() + self.config.slurm.command_timeout_seconds
        next_lookup = time.monotonic() + _LOOKUP_EVERY
        pause = 0.002
        while time.monotonic() < deadline:
            claim = _read_claim(local)
            if claim is not None and claim.kind == "job" and claim.get("slurm_job_id"):
                job_id = claim.get("slurm_job_id")
                return SubmitReceipt(job_id, f"srun job {job_id} started ({name})")
            if claim is not None and claim.fenced:
                raise BackendUnavailable(
                    f"srun: the attempt is fenced ({claim.describe()})", maybe_submitted=True
                )
            returned = process.poll()
            if returned is not None and claim is None:
                message = _tail(local / STDERR_FILE)
                if REJECTIONS.search(message):
                    raise SubmitRejected(f"srun refused the job: {message}", evidence=message)
                raise BackendUnavailable(
                    f"srun exited {returned} before the job started",
                    evidence=message,
                    maybe_submitted=True,
                )
            if time.monotonic() >= next_lookup:
                rows = parse_squeue(self._checked(squeue_argv(names=[name])))
                if rows:
                    return SubmitReceipt(
                        rows[0].job_id, f"srun job {rows[0].job_id}: {rows[0].line}"
                    )
                next_lookup = time.monotonic() + _LOOKUP_EVERY
            # The job's claim comes a few milliseconds after srun's allocation: look often
            # at first (a short job's whole run is that long), then less.
            time.sleep(pause)
            pause = min(pause * 1.5, 0.02)
        raise BackendUnavailable(
            "srun: the job did not appear in time",
            evidence=_tail(local / STDERR_FILE),
            maybe_submitted=True,
        )


class _Ahead:
    """sinfo's answer, asked for on a thread (`prewarm`); None when it failed."""

    def __init__(self) -> None:
        self.text: str | None = None
        self.done = threading.Event()

    def ask(self, backend: SlurmBackend) -> None:
        try:
            self.text = backend._checked(sinfo_argv())
        except Exception:  # the submit asks again, and reports what fails
            self.text = None
        finally:
            self.done.set()

    def answer(self, timeout: float) -> str | None:
        return self.text if self.done.wait(timeout) else None


#: sinfo's answers asked for ahead of the submit, by site configuration path
_SINFO_AHEAD: dict[str, _Ahead] = {}


def prewarm(request: SrunRequest) -> None:
    """Ask sinfo for the partitions' limits now, on a thread, while the invocation is being
    recorded: the submit needs them before it can start srun, and a short job's whole run is
    not much longer than sinfo's answer."""
    if not request.partitions:
        return
    site = request.site()
    if site.slurm.transport.kind != "local":
        return  # refused by the adapter itself, in one line
    ahead = _SINFO_AHEAD[request.site_config] = _Ahead()
    backend = SlurmBackend(site, LocalTransport(site.slurm.transport.shell_command))
    threading.Thread(target=ahead.ask, args=(backend,), name="vibesys-sinfo", daemon=True).start()


class _Launched(Struct):
    process: subprocess.Popen[bytes]
    ended: threading.Event
    partition: str | None

    def reap(self) -> None:
        """Wait for srun (so it never lingers as a zombie), then say it ended."""
        self.process.wait()
        self.ended.set()


def _local_time(utc: str) -> str:
    try:
        moment = datetime.strptime(utc, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return ""
    return moment.astimezone().strftime(SQUEUE_TIME)


def _local_epoch(epoch: float | None) -> str:
    return "" if epoch is None else datetime.fromtimestamp(epoch).strftime(SQUEUE_TIME)


def _kill_local_srun(job_name: str) -> None:
    wanted = f"--job-name={job_name}".encode()
    for pid, cmdline in processes("cmdline"):
        argv = cmdline.split(b"\0")
        if argv and os.path.basename(argv[0]) == b"srun" and wanted in argv:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _read_claim(directory: Path) -> Claim | None:
    try:
        return parse_claim((directory / CLAIM_FILE).read_text(errors="replace"))
    except OSError:
        return None


def _tail(path: Path, limit: int = 2000) -> str:
    try:
        return " ".join(path.read_text(errors="replace")[-limit:].split())
    except FileNotFoundError:
        return ""


def build(request: SrunRequest) -> SrunBackend:
    return SrunBackend(request.site())


#: The registry's names for this adapter's request model and request builder.
Request = SrunRequest
__all__ = ["Request", "SrunBackend", "build", "make_request", "prewarm"]
