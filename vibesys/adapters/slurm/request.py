"""The typed requests of the sbatch and srun adapters, and how `vibesys run` builds them.

Everything is checked here, before anything is recorded: the site configuration is read and
validated, the resource request is checked against the operator's limits (rejected, never
clamped), artifact patterns must stay inside the job's directory, and the candidate snapshot's
digest is computed (the digest recorded at PREPARED is what must run).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from vibesys.adapters.listing import check_pattern
from vibesys.adapters.requests import AdapterRequest
from vibesys.config import (
    SlurmRequest,
    SlurmSiteConfig,
    check_request,
    default_slurm_config_path,
    load_slurm_config,
)
from vibesys.errors import UsageError

__all__ = ["CandidateSpec", "Dependency", "SbatchRequest", "SrunRequest", "make_request"]

#: JSON arrays arrive as lists: lax for the container only, strict for the items.
StrTuple = Annotated[tuple[str, ...], Field(strict=False)]
_FROZEN = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)


class CandidateSpec(BaseModel):
    """The candidate directory to snapshot, and the digest recorded at PREPARED."""

    model_config = _FROZEN

    path: str = Field(description="The candidate directory (absolute).")
    exclude: StrTuple = Field(default=(), description="Extra exclusion patterns.")
    digest: str = Field(description="sha256 of the snapshot's content, recorded at PREPARED.")


class Dependency(BaseModel):
    """Run after another sbatch invocation's job succeeds (Slurm `afterok`)."""

    model_config = _FROZEN

    job_id: str = Field(description="The parent's Slurm job id (its current attempt).")
    invocation: str = Field(description="The parent invocation, for people.")


class SrunRequest(AdapterRequest):
    """A foreground srun job on a submit node."""

    site_config: str = Field(description="The site configuration file (slurm.toml).")
    gpus: int = Field(default=0, ge=0, description="GPUs (generic resource gpu:N).")
    time_minutes: int = Field(gt=0, description="Time limit in whole minutes.")
    partitions: StrTuple = Field(
        default=(), description="Candidate partitions in preference order; empty: Slurm's."
    )
    candidate: CandidateSpec | None = Field(
        default=None, description="Run in a verified snapshot of this candidate."
    )
    artifacts: StrTuple = Field(default=(), description="Files brought home after the job.")

    def backend_key(self) -> str:
        return self.site_config

    def site(self) -> SlurmSiteConfig:
        return load_slurm_config(self.site_config)


class SbatchRequest(SrunRequest):
    """A batch job: the trusted evaluation path."""

    after: Dependency | None = Field(default=None, description="Start once this job succeeds.")

    def runs_after(self) -> str | None:
        return (self.after.invocation or None) if self.after else None

    def with_parent_job(self, job_id: str | None) -> SbatchRequest:
        if self.after is None:
            return self
        after = None if job_id is None else self.after.model_copy(update={"job_id": job_id})
        return self.model_copy(update={"after": after})


def make_request(adapter: str, values: Mapping[str, Any]) -> SbatchRequest | SrunRequest:
    """Check `vibesys run`'s options for a Slurm adapter; UsageError/ConfigError otherwise."""
    path = Path(values.get("slurm_config") or default_slurm_config_path()).expanduser().resolve()
    config = load_slurm_config(path)
    person = SlurmRequest(
        gpus=values.get("gpus") or 0,
        time_minutes=values.get("time_minutes"),
        partition=values.get("partition"),
    )
    checked = check_request(person, config.agent_gpu)
    fields: dict[str, Any] = {
        "site_config": str(path),
        "gpus": checked.gpus,
        "time_minutes": checked.time_minutes,
        "partitions": checked.partitions,
        "artifacts": tuple(check_pattern(p) for p in values.get("artifact") or ()),
        "candidate": candidate_spec(values.get("candidate"), values.get("exclude") or ()),
    }
    if adapter == "sbatch":
        after = values.get("after")
        fields["after"] = Dependency(**after) if after else None
        return SbatchRequest(**fields)
    return SrunRequest(**fields)


def candidate_spec(directory: Path | str | None, exclude: tuple[str, ...]) -> CandidateSpec | None:
    if directory is None:
        if exclude:
            raise UsageError("--exclude needs --candidate")
        return None
    candidate = Path(directory)
    if not candidate.is_dir():
        raise UsageError(f"--candidate {candidate}: not a directory")
    from vibesys.snapshot import SnapshotPolicy, build_manifest  # a candidate's runs only

    manifest = build_manifest(candidate, SnapshotPolicy(exclude=tuple(exclude)))
    return CandidateSpec(
        path=str(candidate.resolve()), exclude=tuple(exclude), digest=manifest.digest
    )
