"""The srun adapter: the agent's foreground GPU commands on a submit node (local transport).

srun runs in its own session with its output going to files in the attempt's directory, so it
survives the death of `vibesys run` exactly like a batch job; vibesys streams those files. The
job is named before it starts, so a crashed run is found again by that name.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

from vibesys.adapters.base import SubmitReceipt, SubmitRequest
from vibesys.adapters.slurm.parse import (
    parse_sinfo_partitions,
    parse_squeue,
    parse_started,
    sinfo_argv,
    squeue_argv,
)
from vibesys.adapters.slurm.partitions import choose_partition, parse_windows
from vibesys.adapters.slurm.sbatch import REJECTIONS, job_spec, request_ref, stage_candidate
from vibesys.adapters.slurm.scheduler import WORK_DIR, SlurmBackendBase, SlurmScheduler
from vibesys.adapters.slurm.script import STARTED_FILE, STDERR_FILE, STDOUT_FILE, srun_argv
from vibesys.adapters.transports import LocalTransport
from vibesys.config import SlurmSiteConfig
from vibesys.errors import BackendUnavailable, ConfigError, SubmitRejected

#: How often, while srun waits for its allocation, squeue is asked whether the job exists.
_LOOKUP_EVERY = 0.5


class SrunBackend(SlurmBackendBase):
    name = "srun"

    def __init__(self, config: SlurmSiteConfig, runner: LocalTransport | None = None) -> None:
        transport = config.slurm.transport
        if transport.kind != "local":
            raise ConfigError('slurm.transport.kind: the srun adapter needs kind = "local"')
        self.transport = runner or LocalTransport(transport.shell_command)
        self.scheduler = SlurmScheduler(config, self.transport)

    def choose(self, request: SubmitRequest) -> tuple[str, ...]:
        """The partition for this request, or the request's own (already checked) choice."""
        wanted = tuple(request.options.get("partitions", ()))
        agent = self.scheduler.config.agent_gpu
        if not wanted:
            return ()
        limits = parse_sinfo_partitions(self.scheduler.checked(sinfo_argv()))
        command = agent.windows_command if agent else None

        def windows() -> dict[str, bool]:
            assert command is not None
            try:
                code, out, _, _ = self.scheduler.run(command)
            except BackendUnavailable:
                return {}
            return parse_windows(out) if code == 0 else {}

        time_minutes = int(request.options.get("time_minutes", 0))
        chosen, _why = choose_partition(wanted, time_minutes, limits, windows if command else None)
        return (chosen,)

    def submit(self, request: SubmitRequest) -> SubmitReceipt:
        scheduler = self.scheduler
        remote = scheduler.remote_dir(request_ref(request))
        options = dict(request.options) | {"partitions": self.choose(request)}
        agent = scheduler.config.agent_gpu
        extra = agent.srun_arguments if agent else ()
        spec = job_spec(
            SubmitRequest(
                request.invocation_id,
                request.attempt,
                request.job_name,
                request.command,
                request.run_dir,
                options,
            ),
            remote,
            extra,
        )
        spec = stage_candidate(scheduler, request, spec)
        local = Path(str(remote))
        (local / WORK_DIR).mkdir(parents=True, exist_ok=True)
        with open(local / STDOUT_FILE, "ab") as out, open(local / STDERR_FILE, "ab") as err:
            process = self.transport.popen(srun_argv(spec), stdout=out, stderr=err)
        threading.Thread(target=process.wait, daemon=True).start()
        return self._await_job(request.job_name, local, process)

    def _await_job(self, name: str, local: Path, process: subprocess.Popen[bytes]) -> SubmitReceipt:
        """Return once the scheduler knows the job: it started, or squeue lists it."""
        deadline = time.monotonic() + self.scheduler.config.slurm.command_timeout_seconds
        next_lookup = time.monotonic() + _LOOKUP_EVERY
        while time.monotonic() < deadline:
            started = local / STARTED_FILE
            if started.exists():
                job_id = parse_started(started.read_text()).get("slurm_job_id", "")
                if job_id:
                    return SubmitReceipt(job_id, f"srun job {job_id} started ({name})")
            returned = process.poll()
            if returned is not None and not started.exists():
                message = _tail(local / STDERR_FILE)
                if REJECTIONS.search(message):
                    raise SubmitRejected(f"srun refused the job: {message}", evidence=message)
                raise BackendUnavailable(
                    f"srun exited {returned} before the job started",
                    evidence=message,
                    maybe_submitted=True,
                )
            if time.monotonic() >= next_lookup:
                rows = parse_squeue(self.scheduler.checked(squeue_argv(names=[name])))
                if rows:
                    return SubmitReceipt(
                        rows[0].job_id, f"srun job {rows[0].job_id}: {rows[0].line}"
                    )
                next_lookup = time.monotonic() + _LOOKUP_EVERY
            time.sleep(0.02)
        raise BackendUnavailable(
            "srun: the job did not appear in time",
            evidence=_tail(local / STDERR_FILE),
            maybe_submitted=True,
        )


def _tail(path: Path, limit: int = 2000) -> str:
    try:
        return " ".join(path.read_text(errors="replace")[-limit:].split())
    except FileNotFoundError:
        return ""
