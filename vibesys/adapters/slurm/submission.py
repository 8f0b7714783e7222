"""What a Slurm submission needs whichever command submits it (sbatch or srun): the job as
Slurm sees it, the candidate's copy-and-verify steps and its staging, the answers that prove
a request invalid, and the attempt's reference before a job id exists."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePosixPath

from msgspec import Struct, structs

from vibesys.adapters import staging
from vibesys.adapters.base import Progress, Submission
from vibesys.adapters.candidate import checked_manifest
from vibesys.adapters.rundir.names import WORK_DIR
from vibesys.adapters.slurm.backend import SlurmBackend
from vibesys.adapters.slurm.limits import REFUSALS
from vibesys.adapters.slurm.request import SlurmRequestBase
from vibesys.adapters.slurm.script import SlurmJobSpec, with_setup
from vibesys.errors import SubmitRejected, UsageError
from vibesys.snapshot import Manifest

__all__ = [
    "REJECTIONS",
    "Candidate",
    "candidate_setup",
    "job_spec",
    "stage_candidate",
]


#: sbatch's answers that prove the request itself is invalid (nothing runs, retrying is futile).
REJECTIONS = REFUSALS


def job_spec(
    submission: Submission[SlurmRequestBase],
    remote: PurePosixPath,
    extra: Sequence[str],
    partitions: tuple[str, ...] | None = None,
) -> SlurmJobSpec:
    """The job as Slurm will see it, from the typed request recorded with the invocation."""
    request = submission.request
    after = submission.after_job
    try:
        return SlurmJobSpec(
            job_name=submission.job_name,
            command=tuple(submission.command),
            remote_attempt_dir=remote,
            time_minutes=request.time_minutes,
            gpus=request.gpus,
            partitions=request.partitions if partitions is None else partitions,
            extra_arguments=tuple(extra),
            dependency=after.split(";")[0] if after else None,
            workdir=remote / WORK_DIR,
        )
    except UsageError as exc:
        raise SubmitRejected(f"invalid submission: {exc}") from exc


class Candidate(Struct, frozen=True):
    """A candidate to stage: its manifest (digest checked), where it is read from and where
    its snapshot lives on the cluster."""

    manifest: Manifest
    path: str
    root: PurePosixPath

    @property
    def digest(self) -> str:
        return self.manifest.digest

    @property
    def snapshot_dir(self) -> PurePosixPath:
        return staging.snapshot_path(self.root, self.manifest.digest)


def candidate_setup(
    backend: SlurmBackend, submission: Submission[SlurmRequestBase], spec: SlurmJobSpec
) -> tuple[SlurmJobSpec, Candidate | None]:
    """The job with its candidate's copy-and-verify steps, and the candidate to stage; no
    remote command yet. The candidate must still have the digest recorded at PREPARED:
    vibesys never runs code other than what it recorded."""
    candidate = submission.request.candidate
    if candidate is None:
        return spec, None
    manifest = checked_manifest(candidate)
    root = PurePosixPath(backend.config.slurm.remote_workspace_root)
    staged = Candidate(manifest, candidate.path, root)
    work = spec.workdir or spec.remote_attempt_dir
    setup = (
        tuple(staging.copy_command(staged.snapshot_dir, work)),
        tuple(staging.verify_command(work, manifest.digest)),
    )
    # The copy replaces the work directory: the job starts in its remote attempt directory and
    # enters the fresh copy only once it is verified.
    command = with_setup(spec.command, setup, spec.remote_attempt_dir, work)
    return structs.replace(spec, command=command, workdir=None), staged


def stage_candidate(
    backend: SlurmBackend,
    submission: Submission[SlurmRequestBase],
    spec: SlurmJobSpec,
    progress: Progress | None = None,
) -> SlurmJobSpec:
    """Stage the candidate snapshot (once per digest) and make the job copy and verify it in
    its work directory before the command runs (the srun adapter's way: a stage, then srun)."""
    spec, candidate = candidate_setup(backend, submission, spec)
    if candidate is not None:
        staging.stage(
            candidate.manifest, candidate.path, backend.runner, candidate.root, progress=progress
        )
    return spec
