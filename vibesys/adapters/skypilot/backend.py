"""The SkyPilot adapter: one campaign's cluster as the allocation lease, `sky exec` per attempt.

One instance serves one campaign (run id + effective resources → one cluster name). The engine
drives it in this order, journaling an intent before each effect (`vibesys.engine.clusters`):

    plan = backend.plan_lease()               refresh + decide (reuse, launch, resume); raises
                                              ClusterIncompatible for a cluster it cannot use
    [intent: launch]  receipt = backend.launch(plan)     [launched: receipt.allocation]
    [intent: submit]  backend.submit(request)            sky exec; job id "<sky id>@<allocation>"
    backend.status(jobs) / fence(job, text) / cancel(job) / collect(job) / RemoteFiles
    [intent: release] backend.release()                  [released]

Status reads two things per round whatever the number of jobs: `sky queue` for the cluster and one
command on the login node for every remote attempt directory's claim and markers (plus, only when a
job is missing, a refresh and the API server's active requests, and only when an allocation is
lost, Slurm's record of how it ended). Every status carries the attempt's claim and where it ran
(provenance).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from msgspec import structs

from vibesys.adapters.base import (
    Backend,
    JobRef,
    Progress,
    RemoteState,
    RemoteStatus,
    Submission,
    SubmitReceipt,
)
from vibesys.adapters.leases import (
    ClusterSight,
    LeaseAction,
    LeasePlan,
    LeaseReceipt,
)
from vibesys.adapters.rundir.claim import Claim
from vibesys.adapters.rundir.names import (
    CANCEL_FILE,
    EXIT_CODE_FILE,
    STDERR_FILE,
    STDOUT_FILE,
    WORK_DIR,
)
from vibesys.adapters.rundir.reader import ReadsRunDirs
from vibesys.adapters.skypilot.allocation_end import name_losses
from vibesys.adapters.skypilot.classify import (
    ClusterView,
    Observed,
    classify,
    format_job_id,
    parse_job_ref_id,
    pick,
)
from vibesys.adapters.skypilot.errors import ClusterGone, ClusterIncompatible, SkyCommandFailed
from vibesys.adapters.skypilot.lease import mismatches, plan_lease
from vibesys.adapters.skypilot.limits import refuse_beyond_limits
from vibesys.adapters.skypilot.naming import cluster_name, fingerprint
from vibesys.adapters.skypilot.ops import SkyOps
from vibesys.adapters.skypilot.parse import ClusterRecord, ClusterStatus, QueueJob
from vibesys.adapters.skypilot.provenance import provenance
from vibesys.adapters.skypilot.request import SkyPilotRequest
from vibesys.adapters.skypilot.run_dirs import RunDirs
from vibesys.adapters.skypilot.staged import stage_candidate
from vibesys.adapters.skypilot.task import exec_task, launch_task, render_task
from vibesys.config.resources import EffectiveResources
from vibesys.errors import BackendError, SubmitRejected

__all__ = ["SkyPilotBackend"]

TASK_FILE: Final = "task.json"
SKY_LOG_FILE: Final = "sky.log"
#: Slurm states of an allocation that still holds (or is about to hold) the cluster.
_LIVE: Final = "PENDING,CONFIGURING,RUNNING,COMPLETING"


class SkyPilotBackend(ReadsRunDirs, Backend):
    name = "skypilot"
    dirs: RunDirs

    # -- what the engine may ask of it (mypy checks each protocol against the adapter) ---

    def remote_files(self) -> SkyPilotBackend:
        return self

    def leasing(self) -> SkyPilotBackend:
        return self

    def shows_progress(self) -> SkyPilotBackend:
        return self

    def __init__(
        self,
        *,
        effective: EffectiveResources,
        run_id: str,
        ops: SkyOps,
        dirs: RunDirs,
        state_dir: Path | None = None,
        envs: Mapping[str, str] | None = None,
        before_launch: Callable[[str], None] | None = None,
        poll_seconds: tuple[float, float] = (10.0, 30.0),
    ) -> None:
        self.effective = effective
        self.run_id = run_id
        self.ops = ops
        self.dirs = dirs
        #: local directory for launch task files (default: a temporary one per launch)
        self.state_dir = state_dir
        self.envs = dict(envs or {})
        #: called with the cluster name before every launch (a site hook, e.g. placing tools
        #: a machine without internet cannot download)
        self.before_launch = before_launch
        #: seconds between status rounds while a job is young, then later
        self.poll_seconds = poll_seconds
        #: hears of staging uploads (set by whoever shows them, a terminal's progress bar)
        self.progress: Progress | None = None
        self.fingerprint = fingerprint(effective)
        self.cluster = cluster_name(run_id, effective)
        self._record: ClusterRecord | None = None
        self._name_on_cloud: str | None = None

    # -- the lease ----------------------------------------------------------------------------

    def check_version(self) -> str:
        return self.ops.cli.check_version()

    def inspect(self, *, refresh: bool = True) -> ClusterRecord | None:
        """The cluster's record; with refresh, None proves its allocation is gone."""
        record = self.ops.status(self.cluster, refresh=refresh)
        self._record = record
        return record

    def plan_lease(self) -> LeasePlan:
        """Refresh (a dead allocation still reads UP without one) and decide. A cluster of this
        name that cannot serve the request is refused, never reused or torn down."""
        record = self.inspect(refresh=True)
        if record is not None:
            problems = mismatches(record, self.effective)
            if problems:
                raise ClusterIncompatible(
                    f"cluster {self.cluster} exists with other resources: {'; '.join(problems)}"
                    " (sky down it, or use a profile that matches it)"
                )
        plan = plan_lease(
            record,
            self.effective,
            cluster=self.cluster,
            fingerprint=self.fingerprint,
            campaign=self.run_id,
        )
        if plan.action is LeaseAction.REUSE:
            plan = structs.replace(plan, allocation=self._allocation_of(record))
        else:  # a launch: its allocation must fit a partition (one sinfo per launch)
            refuse_beyond_limits(self.effective, self.dirs.runner, self.dirs.timeout)
        return plan

    def launch(self, plan: LeasePlan) -> LeaseReceipt:
        """Carry out `plan`: reuse as it is, or `sky launch` (which resumes an INIT cluster and
        makes a new allocation after the old one ended)."""
        if plan.action is LeaseAction.REUSE:
            return self._receipt(launched=False, evidence=plan.reason)
        task = render_task(launch_task(self.effective, self.cluster))
        if self.before_launch is not None:
            self.before_launch(self.cluster)
        with tempfile.TemporaryDirectory(prefix="vibesys-sky-") as scratch:
            folder = self.state_dir or Path(scratch)
            folder.mkdir(parents=True, exist_ok=True)
            task_file = folder / f"{self.cluster}.launch.json"
            task_file.write_text(task)
            evidence = self.ops.launch(self.cluster, task_file)
        if self.inspect(refresh=False) is None:
            raise ClusterGone(
                f"cluster {self.cluster} vanished right after its launch", evidence=evidence
            )
        return self._receipt(launched=True, evidence=evidence)

    def ensure_lease(self) -> LeaseReceipt:
        """plan_lease + launch, for callers that journal nothing in between (tools, tests)."""
        return self.launch(self.plan_lease())

    def release(self) -> str:
        """`sky down`: ends the allocation. Idempotent (an unknown cluster is fine)."""
        evidence = self.ops.down(self.cluster)
        self._record = None
        return evidence

    def inspect_lease(self) -> ClusterSight:
        record = self.inspect(refresh=True)
        launching = bool(self.ops.submitting_requests()) if record is None else False
        if record is None:
            return ClusterSight(False, False, (), launching, f"no cluster {self.cluster}")
        up = record.status is ClusterStatus.UP
        allocation = self._allocation_of(record) if up else ()
        return ClusterSight(True, up, allocation, False, f"cluster {self.cluster} {record.status}")

    def _receipt(self, *, launched: bool, evidence: str) -> LeaseReceipt:
        return LeaseReceipt(
            self.cluster,
            self.fingerprint,
            self.effective.profile,
            self._allocation_of(self._record),
            launched,
            evidence,
        )

    def _allocation_of(self, record: ClusterRecord | None) -> tuple[str, ...]:
        if record is not None and record.allocation:
            return record.allocation
        found = self.allocation()
        return (found,) if found else ()

    def allocation(self) -> str | None:
        """The Slurm job id of the allocation holding the cluster now. SkyPilot shows it in
        `node_names` only until a refresh clears it (0.14.1), so Slurm is asked otherwise:
        the allocation is the live job named after the cluster on the cloud."""
        record = self._record if self._record is not None else self.inspect(refresh=False)
        if record is None:
            return None
        if record.allocation:
            return record.allocation[0]
        if self._name_on_cloud is None:
            answer = self.ops.helper("name-on-cloud", self.cluster)
            self._name_on_cloud = str(answer["name_on_cloud"])
        argv = ["squeue", "-h", "--name", self._name_on_cloud, "-o", "%i", f"--states={_LIVE}"]
        result = self.dirs.runner.run(argv, timeout=self.dirs.timeout)
        if result.returncode != 0:
            raise SkyCommandFailed(
                "squeue on the login node failed",
                returncode=result.returncode,
                evidence=result.evidence(),
            )
        found = sorted(
            (int(word) for word in result.stdout.split() if word.isdigit()), reverse=True
        )
        return str(found[0]) if found else None

    # -- Backend ------------------------------------------------------------------------------

    def submit(self, submission: Submission[SkyPilotRequest]) -> SubmitReceipt:
        ref = submission.job_ref()
        try:
            remote_attempt_dir = self.dirs.remote_attempt_dir(ref)
            passed = submission.request.passed(submission.context.env)
        except ValueError as exc:
            raise SubmitRejected(f"invalid submission: {exc}") from None
        setup, staged = stage_candidate(
            submission.request, self.dirs, remote_attempt_dir / WORK_DIR, self.progress
        )
        try:
            task = exec_task(
                self.effective,
                job_name=submission.job_name,
                cluster=self.cluster,
                remote_attempt_dir=remote_attempt_dir,
                command=submission.command,
                setup=setup,
                envs=self.envs,
            )
        except ValueError as exc:
            raise SubmitRejected(f"invalid submission: {exc}") from None
        submission.attempt_dir.mkdir(parents=True, exist_ok=True)
        task_file = submission.attempt_dir / TASK_FILE
        task_file.write_text(render_task(task))
        sky_id, evidence = self.ops.exec(self.cluster, task_file, passed)
        if staged:
            evidence = f"{staged}; {evidence}"
        # The job is submitted now: nothing after this line may say otherwise. Its allocation
        # is best effort (the claim and the next status tell it too).
        try:
            allocation = self.allocation()
        except BackendError:
            allocation = None
        return SubmitReceipt(format_job_id(sky_id, allocation), evidence)

    def status(self, jobs: Sequence[JobRef]) -> dict[str, RemoteStatus]:
        if not jobs:
            return {}
        queue = self.ops.queue(self.cluster)
        if queue is None:
            view = ClusterView.GONE if self.inspect(refresh=True) is None else ClusterView.UNKNOWN
            allocation = None
        else:
            view, allocation = ClusterView.UP, self.allocation()
        files = self.dirs.states(jobs)
        seen = {
            job.job_name: self._observe(job, queue or [], view, allocation, files) for job in jobs
        }
        result = {name: classify(observed) for name, observed in seen.items()}
        missing = [name for name, status in result.items() if status.state is RemoteState.NOT_FOUND]
        # An exec whose client died lives on in the API server: absent is not yet proven.
        if missing and self.ops.submitting_requests():
            for name in missing:
                result[name] = classify(structs.replace(seen[name], submissions_in_flight=True))
        result = name_losses(result, seen, self.dirs)  # preempted, wall time, node failure
        return {name: self._with_provenance(s, seen[name]) for name, s in result.items()}

    def _with_provenance(self, status: RemoteStatus, seen: Observed) -> RemoteStatus:
        # SkyPilot's queue records the end a moment after the wrapper wrote the exit code (and
        # the status may come from that marker first): the marker's time stands in till then.
        ended = seen.queued.end_at if seen.queued is not None else None
        if ended is None and seen.files.exit_code is not None:
            ended = seen.files.exit_written_at
        found = provenance(self.effective, self.cluster, status.job_id, seen.files.claim, ended)
        return structs.replace(status, provenance=found) if found else status

    def _observe(
        self,
        job: JobRef,
        queue: Sequence[QueueJob],
        view: ClusterView,
        allocation: str | None,
        files: Mapping[str, Any],
    ) -> Observed:
        state = files[job.job_name]
        claim = state.claim if state.claim is not None and state.claim.kind == "job" else None
        claimed = claim.get("sky_job_id") if claim is not None else ""
        claim_alloc = (claim.get("slurm_job_id") or None) if claim is not None else None
        recorded, recorded_alloc = parse_job_ref_id(job.job_id)
        queued = pick(
            queue,
            job.job_name,
            int(claimed) if claimed.isdigit() and claim_alloc == allocation else None,
            recorded if recorded_alloc in (None, allocation) else None,
        )
        if queued is not None and claim_alloc is not None and claim_alloc != allocation:
            queued = None  # a job of that name here is not the one that claimed elsewhere
        return Observed(
            job_name=job.job_name,
            recorded_id=job.job_id,
            queued=queued,
            cluster=view,
            allocation=allocation,
            files=state,
            cancelled_by_us=(job.attempt_dir / CANCEL_FILE).exists(),
            submissions_in_flight=False,
        )

    def cancel(self, job: JobRef) -> None:
        """Cancel the job, never the cluster. Idempotent; nothing to do when it is not found."""
        job.attempt_dir.mkdir(parents=True, exist_ok=True)
        (job.attempt_dir / CANCEL_FILE).touch()
        queue = self.ops.queue(self.cluster)
        if not queue:
            return
        allocation = self.allocation()
        recorded, recorded_alloc = parse_job_ref_id(job.job_id)
        queued = pick(
            queue, job.job_name, None, recorded if recorded_alloc in (None, allocation) else None
        )
        if queued is None or queued.status.terminal:
            return
        try:
            self.ops.cancel(self.cluster, queued.job_id)
        except ClusterGone:
            return

    def fence(self, job: JobRef, text: str) -> Claim:
        """Retire an ambiguous attempt: create its claim as a fence unless the job claimed it
        first; the claim that is there now. Written on the login node, out of band: never
        through `sky exec`, the very channel whose pending request it has to outrun."""
        return self.dirs.fence(job, text)

    def collect(self, job: JobRef) -> str:
        """Keep the marker (and SkyPilot's own job log, which dies with the cluster home) at
        home; the command's output comes home through the spool (read_log)."""
        job.attempt_dir.mkdir(parents=True, exist_ok=True)
        state = self.dirs.state(job)
        notes = [f"remote attempt dir {self.dirs.remote_attempt_dir(job)}: {state.describe()}"]
        if state.exit_code is not None:
            (job.attempt_dir / EXIT_CODE_FILE).write_text(f"{state.exit_code}\n")
        sky_id, allocation = parse_job_ref_id(job.job_id)
        if sky_id is not None and allocation == self.allocation():
            done = self.ops.cli.run(
                ["logs", self.cluster, str(sky_id), "--no-follow", "--tail", "0"]
            )
            (job.attempt_dir / SKY_LOG_FILE).write_text(self.ops.cli.clean(done.stdout))
            notes.append(f"sky log saved ({len(done.stdout)} chars, rc {done.returncode})")
        return "; ".join(notes)

    def log_paths(self, job: JobRef) -> tuple[Path, Path]:
        return job.attempt_dir / STDOUT_FILE, job.attempt_dir / STDERR_FILE

    def poll_interval(self, age_seconds: float) -> float:
        # Every status round is a `sky queue` plus a command on the login node: seconds each.
        young, old = self.poll_seconds
        return young if age_seconds < 120 else old
