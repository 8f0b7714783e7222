"""The typed requests of the sbatch and srun adapters, and how `vibesys run` builds them.

Everything is checked here, before anything is recorded: the site configuration is read and
validated (once: its rendering is recorded with the invocation), the agent's srun request is
checked against the operator's limits (rejected, never clamped), a trusted sbatch evaluation is
sized by the request itself (or a deprecated `[slurm_gpu]` table's gate sizing), artifact
patterns must stay inside the job's directory, and the candidate snapshot's digest is computed
(the digest recorded at PREPARED is what must run).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from vibesys.adapters.candidate import RecordedCandidate, digest_candidate
from vibesys.adapters.requests import AdapterRequest
from vibesys.adapters.rundir.listing import check_pattern
from vibesys.config.load import load_slurm_config, recorded_slurm
from vibesys.config.site import RecordedSite, slurm_site
from vibesys.config.sizing import AskedSizing, check_sizing, check_trusted
from vibesys.config.slurm import SlurmSiteConfig
from vibesys.config.slurm_file import SlurmSiteFile, load_site_file, site_file_path, warn_once
from vibesys.errors import UsageError

__all__ = [
    "Dependency",
    "RecordedCandidate",
    "SbatchRequest",
    "SlurmRequestBase",
    "SrunRequest",
    "make_request",
    "request_from_site",
]

#: JSON arrays arrive as lists: lax for the container only, strict for the items.
StrTuple = Annotated[tuple[str, ...], Field(strict=False)]
_FROZEN = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)


class Dependency(BaseModel):
    """Run after another sbatch invocation's job succeeds (Slurm `afterok`)."""

    model_config = _FROZEN

    job_id: str = Field(description="The parent's Slurm job id (its current attempt).")
    invocation: str = Field(description="The parent invocation, for people.")


class SlurmRequestBase(AdapterRequest):
    """What the sbatch and srun requests share."""

    site_config: str = Field(
        description="The site configuration file (slurm.toml) it was read from, for people: "
        "the invocation runs with the rendering recorded at PREPARED."
    )
    gpus: int = Field(default=0, ge=0, description="GPUs (generic resource gpu:N).")
    time_minutes: int | None = Field(default=None, gt=0, description="Time limit in minutes.")
    partitions: StrTuple = Field(
        default=(), description="Candidate partitions in preference order; empty: Slurm's."
    )
    candidate: RecordedCandidate | None = Field(
        default=None, description="Run in a verified snapshot of this candidate."
    )
    artifacts: StrTuple = Field(default=(), description="Files brought home after the job.")

    def backend_key(self) -> str:
        recorded = self.site_record.digest if self.site_record is not None else ""
        return f"{self.site_config}#{recorded}"

    def site(self) -> SlurmSiteConfig:
        """The site configuration the invocation runs with: the recorded rendering. Only an
        invocation recorded before renderings were (no digest) reads its file."""
        if self.site_record is not None:
            return recorded_slurm(self.site_record)
        return load_slurm_config(self.site_config)

    def read_site(self) -> RecordedSite:
        return self.read_site_from(self.site_config)

    def read_site_from(self, path: str, profile: str | None = None) -> RecordedSite:
        if profile is not None:
            raise UsageError("--profile names a SkyPilot profile; a Slurm site has none")
        loaded = load_site_file(Path(path).expanduser().resolve())
        warn_once(loaded.warning)
        return slurm_site(loaded.config)


class SrunRequest(SlurmRequestBase):
    """A foreground srun job on a submit node."""

    time_minutes: int = Field(gt=0, description="Time limit in whole minutes.")


class SbatchRequest(SlurmRequestBase):
    """A batch job: the trusted evaluation path, sized by the request and [slurm] (its
    sbatch_arguments), never by [vibesys.agent_gpu]."""

    time_minutes: int | None = Field(
        default=None,
        gt=0,
        description="Time limit in whole minutes; None: the partition's default (or one in "
        "sbatch_arguments).",
    )
    after: Dependency | None = Field(default=None, description="Start once this job succeeds.")

    def runs_after(self) -> str | None:
        return (self.after.invocation or None) if self.after else None

    def recorded_parent_job(self) -> str | None:
        return self.after.job_id if self.after else None


def make_request(adapter: str, values: Mapping[str, Any]) -> SbatchRequest | SrunRequest:
    """Check `vibesys run`'s options for a Slurm adapter; UsageError/ConfigError otherwise.
    The site file is read here, once: its rendering goes with the request to be recorded."""
    loaded = load_site_file(site_file_path(values.get("slurm_config")))
    warn_once(loaded.warning)
    return request_from_site(adapter, values, loaded)


def request_from_site(
    adapter: str,
    values: Mapping[str, Any],
    loaded: SlurmSiteFile,
    rendering: RecordedSite | None = None,
) -> SbatchRequest | SrunRequest:
    """`make_request` with a site file read before, and its `rendering` if made before too (a
    session reads and renders its site once, when it starts: every evaluation's request gets
    that rendering, whatever the file says later)."""
    path = loaded.path
    person = AskedSizing(
        gpus=values.get("gpus") or 0,
        time_minutes=values.get("time_minutes"),
        partition=values.get("partition"),
    )
    common: dict[str, Any] = {
        "site_config": str(path),
        "artifacts": tuple(check_pattern(p) for p in values.get("artifact") or ()),
        "candidate": digest_candidate(values.get("candidate"), values.get("exclude") or ()),
        "site_record": rendering or slurm_site(loaded.config),
    }
    if adapter == "sbatch":
        trusted = check_trusted(person, loaded.gate)
        after = values.get("after")
        return SbatchRequest(
            **common,
            gpus=trusted.gpus,
            time_minutes=trusted.time_minutes,
            partitions=trusted.partitions,
            after=Dependency(**after) if after else None,
        )
    checked = check_sizing(person, loaded.config.agent_gpu)
    return SrunRequest(
        **common,
        gpus=checked.gpus,
        time_minutes=checked.time_minutes,
        partitions=checked.partitions,
    )
