"""What `vibesys run` checks and records before anything is written: the resource request
against the site configuration, the candidate snapshot's digest, the job it runs after."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from vibesys.errors import UsageError

if TYPE_CHECKING:
    from vibesys.journal_schema import Journal


def adapter_options(
    adapter: str,
    slurm_config: Path | None,
    gpus: int | None,
    time_minutes: int | None,
    partition: str | None,
) -> dict[str, Any]:
    """Check the resource request against the site configuration, before anything is written."""
    from vibesys.adapters import SLURM_ADAPTERS

    if adapter not in SLURM_ADAPTERS:
        if any(v is not None for v in (slurm_config, gpus, time_minutes, partition)):
            raise UsageError(
                "--slurm-config, --gpus, --time and --partition need --adapter sbatch or srun"
            )
        return {}
    from vibesys.config import (
        SlurmRequest,
        check_request,
        default_slurm_config_path,
        load_slurm_config,
    )

    path = (slurm_config or default_slurm_config_path()).expanduser().resolve()
    config = load_slurm_config(path)
    request = SlurmRequest(gpus=gpus or 0, time_minutes=time_minutes, partition=partition)
    checked = check_request(request, config.agent_gpu)
    return {
        "site_config": str(path),
        "gpus": checked.gpus,
        "time_minutes": checked.time_minutes,
        "partitions": list(checked.partitions),
    }


def candidate_manifest(directory: Path, exclude: list[str]) -> Any:
    from vibesys.adapters.snapshot import SnapshotPolicy, build_manifest

    if not directory.is_dir():
        raise UsageError(f"candidate {directory} is not a directory")
    return build_manifest(directory, SnapshotPolicy(exclude=tuple(exclude)))


def artifact_options(patterns: list[str]) -> dict[str, Any]:
    if not patterns:
        return {}
    from vibesys.adapters.listing import check_pattern

    return {"artifacts": [check_pattern(p) for p in patterns]}


def snapshot_options(adapter: str, candidate: Path | None, exclude: list[str]) -> dict[str, Any]:
    """The candidate's digest, recorded at PREPARED; the snapshot is staged before submit."""
    if candidate is None and not exclude:
        return {}
    if adapter == "local" or candidate is None:
        raise UsageError(
            "--candidate (and --exclude) need --adapter sbatch or srun and a directory"
        )
    manifest = candidate_manifest(candidate, exclude)
    return {
        "candidate": str(candidate.resolve()),
        "snapshot_exclude": list(exclude),
        "snapshot_digest": manifest.digest,
    }


def dependency_options(journal: Journal, parent: str, adapter: str) -> dict[str, Any]:
    """Run after another sbatch invocation's current job succeeds (Slurm `afterok`, with
    `--kill-on-invalid-dep=yes`, so a failed parent cancels this one instead of leaving it
    pending forever)."""
    if adapter != "sbatch":
        raise UsageError("--after needs --adapter sbatch")
    inv = journal.resolve(parent)
    attempts = journal.attempts(inv.id)
    job_id = attempts[-1].job_id if attempts else None
    if inv.adapter != "sbatch" or job_id is None:
        raise UsageError(f"--after {parent}: not an sbatch invocation with a submitted job")
    return {"dependency": job_id.split(";")[0], "after": inv.id}
