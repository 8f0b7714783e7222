"""The sbatch adapter: the trusted evaluation path. Every job is named before it is submitted
(`--job-name=<stable name>`), never requeued by Slurm, claims its attempt before its command
starts, and is found again by that name (or its claim)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import PurePosixPath

from vibesys.adapters.base import JobRef, SubmitReceipt, SubmitRequest
from vibesys.adapters.slurm.parse import parse_sbatch_parsable
from vibesys.adapters.slurm.request import SbatchRequest, SrunRequest, make_request
from vibesys.adapters.slurm.scheduler import WORK_DIR, SlurmBackendBase, SlurmScheduler
from vibesys.adapters.slurm.script import (
    SCRIPT_FILE,
    SlurmJobSpec,
    render_sbatch,
    sbatch_argv,
    with_setup,
)
from vibesys.adapters.staging import copy_command, stage, verify_command
from vibesys.adapters.transports import Runner, runner_from_config
from vibesys.config import SlurmSiteConfig
from vibesys.errors import BackendMisconfigured, BackendUnavailable, SubmitRejected, UsageError
from vibesys.snapshot import CandidateError, SnapshotPolicy, build_manifest

#: sbatch's answers that prove the request itself is invalid (nothing runs, retrying is futile).
REJECTIONS = re.compile(
    r"invalid partition|Requested time limit is invalid|node configuration is not available|"
    r"Memory specification can not be satisfied|Invalid generic resource|Invalid account|"
    r"Invalid qos|violates accounting/QOS policy|Invalid dependency|Job dependency problem",
    re.IGNORECASE,
)


def job_spec(
    request: SubmitRequest[SrunRequest],
    remote: PurePosixPath,
    extra: Sequence[str],
    partitions: tuple[str, ...] | None = None,
) -> SlurmJobSpec:
    """The job as Slurm will see it, from the typed request recorded with the invocation."""
    spec = request.spec
    after = spec.after if isinstance(spec, SbatchRequest) else None
    try:
        return SlurmJobSpec(
            job_name=request.job_name,
            command=tuple(request.command),
            run_dir=remote,
            time_minutes=spec.time_minutes,
            gpus=spec.gpus,
            partitions=spec.partitions if partitions is None else partitions,
            extra_arguments=tuple(extra),
            dependency=after.job_id.split(";")[0] if after else None,
            workdir=remote / WORK_DIR,
        )
    except UsageError as exc:
        raise SubmitRejected(f"invalid request: {exc}") from exc


def stage_candidate(
    scheduler: SlurmScheduler, request: SubmitRequest[SrunRequest], spec: SlurmJobSpec
) -> SlurmJobSpec:
    """Stage the candidate snapshot (once per digest) and make the job copy and verify it in
    its work directory before the command runs. The candidate must still have the digest
    recorded at PREPARED: vibesys never runs code other than what it recorded."""
    candidate = request.spec.candidate
    if candidate is None:
        return spec
    try:
        manifest = build_manifest(candidate.path, SnapshotPolicy(exclude=candidate.exclude))
    except CandidateError as exc:
        raise BackendMisconfigured(
            f"the candidate cannot be snapshotted: {exc}",
            fix=f"restore {candidate.path}, or run again with the candidate as it is now",
        ) from None
    if manifest.digest != candidate.digest:
        raise BackendMisconfigured(
            f"the candidate {candidate.path} changed since it was recorded (digest "
            f"{candidate.digest}, now {manifest.digest})",
            fix="run again to record the candidate as it is now",
        )
    root = PurePosixPath(scheduler.config.slurm.remote_workspace_root)
    staged = stage(manifest, candidate.path, scheduler.runner, root)
    work = spec.workdir or spec.run_dir
    setup = (
        tuple(copy_command(staged.snapshot_dir, work)),
        tuple(verify_command(work, manifest.digest)),
    )
    # The copy replaces the work directory: the job starts in its run directory and enters
    # the fresh copy only once it is verified.
    command = with_setup(spec.command, setup, spec.run_dir, work)
    return dataclasses.replace(spec, command=command, workdir=None)


def request_ref(request: SubmitRequest[SrunRequest]) -> JobRef:
    return JobRef(
        request.job_name, None, request.run_dir, None, request.invocation_id, request.attempt
    )


class SbatchBackend(SlurmBackendBase):
    name = "sbatch"

    def __init__(self, config: SlurmSiteConfig, runner: Runner | None = None) -> None:
        runner = runner or runner_from_config(config.slurm.transport)
        self.scheduler = SlurmScheduler(config, runner)

    def submit(self, request: SubmitRequest[SrunRequest]) -> SubmitReceipt:
        scheduler = self.scheduler
        remote = scheduler.remote_dir(request_ref(request))
        spec = job_spec(request, remote, scheduler.config.slurm.sbatch_arguments)
        spec = stage_candidate(scheduler, request, spec)
        script = render_sbatch(spec)
        request.run_dir.mkdir(parents=True, exist_ok=True)
        (request.run_dir / SCRIPT_FILE).write_text(script)
        script_path = str(remote / SCRIPT_FILE)
        scheduler.checked(["mkdir", "-p", str(remote / WORK_DIR)])
        upload = ["sh", "-c", 'cat > "$1"', "vibesys-upload", script_path]
        code, _, _, evidence = scheduler.run(upload, input=script.encode())
        if code != 0:
            raise BackendUnavailable("could not write the batch script", evidence=evidence)
        code, out, err, evidence = scheduler.run(
            sbatch_argv(script_path), maybe_effect=True, env=request.context.env
        )
        if code == 0:
            try:
                job_id = parse_sbatch_parsable(out)
            except BackendUnavailable as exc:
                # sbatch said yes in words we do not read: it may well have queued the job.
                raise BackendUnavailable(str(exc), evidence=evidence, maybe_submitted=True) from exc
            return SubmitReceipt(job_id, evidence)
        if REJECTIONS.search(err):
            raise SubmitRejected(
                f"sbatch refused the job: {' '.join(err.split())}", evidence=evidence
            )
        # Anything else (a timeout, "Socket timed out", a busy controller) may still have
        # queued the job: only a lookup by name, or a fence, can tell.
        raise BackendUnavailable("sbatch failed", evidence=evidence, maybe_submitted=True)


def build(request: SbatchRequest) -> SbatchBackend:
    return SbatchBackend(request.site())


#: The registry's names for this adapter's request model and request builder.
Request = SbatchRequest
__all__ = ["REJECTIONS", "Request", "SbatchBackend", "build", "make_request"]
