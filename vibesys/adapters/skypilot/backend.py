"""The SkyPilot adapter: one campaign's cluster as the allocation lease, `sky exec` per attempt.

One instance serves one campaign (run id + effective resources → one cluster name). The engine
drives it in this order, journaling an intent before each effect:

    backend.check_version()                   at startup: refuses any SkyPilot but the pin
    plan = backend.plan_lease()               refresh + decide (reuse, launch, resume); raises
                                              ClusterIncompatible for a cluster it cannot use
    [intent: launch]  receipt = backend.launch(plan)     [launched: receipt.allocation]
    [intent: submit]  backend.submit(request)            sky exec; job id "<sky id>@<allocation>"
    backend.status(jobs) / fence(job) / cancel(job) / collect(job) / RemoteFiles
    [intent: release] backend.release()                  [released]

Status reads two things per round whatever the number of jobs: `sky queue` for the cluster and
one command on the login node for every run directory's claim and markers (plus, only when a
job is missing, a refresh and the API server's active requests).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from vibesys.adapters.base import (
    ArtifactInfo,
    Backend,
    JobRef,
    RemoteFiles,
    RemoteState,
    RemoteStatus,
    Sink,
    SubmitReceipt,
    SubmitRequest,
)
from vibesys.adapters.skypilot.claim import Claim
from vibesys.adapters.skypilot.classify import (
    ClusterView,
    Observed,
    classify,
    format_job_id,
    parse_job_ref_id,
    pick,
)
from vibesys.adapters.skypilot.errors import ClusterGone, ClusterIncompatible, SkyCommandFailed
from vibesys.adapters.skypilot.lease import (
    LeaseAction,
    LeasePlan,
    LeaseReceipt,
    mismatches,
    plan_lease,
)
from vibesys.adapters.skypilot.naming import cluster_name, fingerprint
from vibesys.adapters.skypilot.ops import SkyOps
from vibesys.adapters.skypilot.parse import ClusterRecord, QueueJob
from vibesys.adapters.skypilot.provenance import Provenance
from vibesys.adapters.skypilot.rundirs import RunDirs
from vibesys.adapters.skypilot.task import exec_task, launch_task, render_task
from vibesys.adapters.skypilot.wrapper import EXIT_CODE_FILE, STDERR_FILE, STDOUT_FILE
from vibesys.config.resources import EffectiveResources
from vibesys.errors import SubmitRejected

__all__ = ["SkyPilotBackend"]

CANCEL_MARKER: Final = "cancel_requested"
TASK_FILE: Final = "task.json"
SKY_LOG_FILE: Final = "sky.log"
#: Slurm states of an allocation that still holds (or is about to hold) the cluster.
_LIVE: Final = "PENDING,CONFIGURING,RUNNING,COMPLETING"


class SkyPilotBackend:
    name = "skypilot"

    def __init__(
        self,
        *,
        effective: EffectiveResources,
        run_id: str,
        ops: SkyOps,
        dirs: RunDirs,
        state_dir: Path,
        workdir: str | None = None,
        envs: Mapping[str, str] | None = None,
        before_launch: Callable[[str], None] | None = None,
        identity: str = "vibesys",
    ) -> None:
        self.effective = effective
        self.run_id = run_id
        self.ops = ops
        self.dirs = dirs
        #: local directory for the launch task file
        self.state_dir = state_dir
        self.workdir = workdir
        self.envs = dict(envs or {})
        #: called with the cluster name before every launch (a site hook, e.g. placing tools
        #: a machine without internet cannot download)
        self.before_launch = before_launch
        #: written into fences, to say who retired an attempt
        self.identity = identity
        self.fingerprint = fingerprint(effective)
        self.cluster = cluster_name(run_id, effective)
        self._record: ClusterRecord | None = None
        self._name_on_cloud: str | None = None

    # -- the lease --------------------------------------------------------------------------

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
        return plan_lease(record, self.effective, self.cluster, self.fingerprint)

    def launch(self, plan: LeasePlan) -> LeaseReceipt:
        """Carry out `plan`: reuse as it is, or `sky launch` (which resumes an INIT cluster and
        makes a new allocation after the old one ended)."""
        if plan.action is LeaseAction.REUSE and plan.record is not None:
            return self._receipt(plan.record, launched=False, evidence=plan.reason)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        task_file = self.state_dir / f"{self.cluster}.launch.json"
        task_file.write_text(render_task(launch_task(self.effective, self.cluster)))
        if self.before_launch is not None:
            self.before_launch(self.cluster)
        evidence = self.ops.launch(self.cluster, task_file)
        record = self.inspect(refresh=False)
        if record is None:
            raise ClusterGone(
                f"cluster {self.cluster} vanished right after its launch", evidence=evidence
            )
        return self._receipt(record, launched=True, evidence=evidence)

    def ensure_lease(self) -> LeaseReceipt:
        """plan_lease + launch, for callers that journal nothing in between (tests, tools)."""
        return self.launch(self.plan_lease())

    def release(self) -> str:
        """`sky down`: ends the allocation. Idempotent (an unknown cluster is fine)."""
        evidence = self.ops.down(self.cluster)
        self._record = None
        return evidence

    def _receipt(self, record: ClusterRecord, *, launched: bool, evidence: str) -> LeaseReceipt:
        allocation = record.allocation or tuple(filter(None, [self.allocation()]))
        return LeaseReceipt(
            self.cluster,
            self.fingerprint,
            self.effective.profile,
            allocation,
            launched,
            evidence,
            record,
        )

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

    # -- Backend ----------------------------------------------------------------------------

    def submit(self, request: SubmitRequest) -> SubmitReceipt:
        ref = _ref(request)
        try:
            run_dir = self.dirs.run_dir(ref)
        except ValueError as exc:
            raise SubmitRejected(f"invalid request: {exc}") from None
        task = exec_task(
            self.effective,
            job_name=request.job_name,
            cluster=self.cluster,
            run_dir=run_dir,
            command=request.command,
            workdir=request.options.get("workdir", self.workdir),
            envs=self.envs,
        )
        request.run_dir.mkdir(parents=True, exist_ok=True)
        task_file = request.run_dir / TASK_FILE
        task_file.write_text(render_task(task))
        sky_id, evidence = self.ops.exec(self.cluster, task_file)
        return SubmitReceipt(format_job_id(sky_id, self.allocation()), evidence)

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
                result[name] = classify(dataclasses.replace(seen[name], submissions_in_flight=True))
        return result

    def _observe(
        self,
        job: JobRef,
        queue: Sequence[QueueJob],
        view: ClusterView,
        allocation: str | None,
        files: Mapping[str, Any],
    ) -> Observed:
        state = files[job.job_name]
        claimed = state.claim.get("sky_job_id") if state.claim is not None else None
        claim_alloc = state.claim.get("slurm_job_id") if state.claim is not None else None
        recorded, recorded_alloc = parse_job_ref_id(job.job_id)
        queued = pick(
            queue,
            job.job_name,
            int(claimed) if claimed and claimed.isdigit() and claim_alloc == allocation else None,
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
            cancelled_by_us=(job.run_dir / CANCEL_MARKER).exists(),
            submissions_in_flight=False,
        )

    def cancel(self, job: JobRef) -> None:
        """Cancel the job, never the cluster. Idempotent; nothing to do when it is not found."""
        job.run_dir.mkdir(parents=True, exist_ok=True)
        (job.run_dir / CANCEL_MARKER).touch()
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

    def fence(self, job: JobRef) -> Claim:
        """Retire an ambiguous attempt: create its claim as a fence unless the job claimed it
        first; the claim that is there now (written out of band, not through `sky exec`)."""
        return self.dirs.fence(job, self.identity)

    def collect(self, job: JobRef) -> str:
        """Keep the marker (and SkyPilot's own job log, which dies with the cluster home) at
        home; the command's output comes home through the spool (read_log)."""
        job.run_dir.mkdir(parents=True, exist_ok=True)
        state = self.dirs.state(job)
        notes = [f"run dir {self.dirs.run_dir(job)}: {state.describe()}"]
        if state.exit_code is not None:
            (job.run_dir / EXIT_CODE_FILE).write_text(f"{state.exit_code}\n")
        sky_id, allocation = parse_job_ref_id(job.job_id)
        if sky_id is not None and allocation == self.allocation():
            done = self.ops.cli.run(
                ["logs", self.cluster, str(sky_id), "--no-follow", "--tail", "0"]
            )
            (job.run_dir / SKY_LOG_FILE).write_text(self.ops.cli.clean(done.stdout))
            notes.append(f"sky log saved ({len(done.stdout)} chars, rc {done.returncode})")
        return "; ".join(notes)

    def log_paths(self, job: JobRef) -> tuple[Path, Path]:
        return job.run_dir / STDOUT_FILE, job.run_dir / STDERR_FILE

    def poll_interval(self, age_seconds: float) -> float:
        # Every status round is SSH + srun + a Python start on the node, seconds each.
        return 10.0 if age_seconds < 120 else 30.0

    def read_log(self, job: JobRef, stream: str, offset: int, sink: Sink) -> int:
        return self.dirs.read_log(job, stream, offset, sink)

    def list_artifacts(
        self, job: JobRef, patterns: Sequence[str]
    ) -> tuple[list[ArtifactInfo], list[str]]:
        return self.dirs.list_artifacts(job, patterns)

    def fetch_artifact(self, job: JobRef, path: str, sink: Sink) -> None:
        self.dirs.fetch_artifact(job, path, sink)

    def provenance(self, job: JobRef) -> Provenance:
        """Where and on what the attempt ran, from its claim (its own account) or else its
        recorded job id."""
        state = self.dirs.state(job)
        sky_id, allocation = parse_job_ref_id(job.job_id)
        claim = state.claim if state.claim is not None and state.claim.is_job else None
        return Provenance(
            profile=self.effective.profile,
            cluster=self.cluster,
            infra=self.effective.infra,
            accelerator_type=self.effective.accelerator_type,
            accelerators_per_node=self.effective.accelerators_per_node,
            nodes=self.effective.nodes,
            command_prefix=self.effective.command_prefix,
            sky_job_id=(claim.get("sky_job_id") if claim else None) or _text(sky_id),
            allocation_job_id=(claim.get("slurm_job_id") if claim else None) or allocation,
            host=claim.get("host") if claim else None,
            started_at=claim.get("started_at") if claim else None,
        )


def _ref(request: SubmitRequest) -> JobRef:
    return JobRef(
        request.job_name, None, request.run_dir, None, request.invocation_id, request.attempt
    )


def _text(value: int | None) -> str | None:
    return None if value is None else str(value)


def _conforms(backend: SkyPilotBackend) -> tuple[Backend, RemoteFiles]:
    """Never called: mypy checks here that the adapter keeps both protocols."""
    return backend, backend
