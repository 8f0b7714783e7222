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

from msgspec import Meta, Struct

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

_POSITIVE = Meta(gt=0)


class Dependency(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Run after another sbatch invocation's job succeeds (Slurm `afterok`)."""

    #: the parent's Slurm job id (its current attempt)
    job_id: str
    #: the parent invocation, for people
    invocation: str


class SlurmRequestBase(AdapterRequest, frozen=True, kw_only=True):
    """What the sbatch and srun requests share."""

    #: The site configuration file (slurm.toml) it was read from, for people: the invocation
    #: runs with the rendering recorded at PREPARED.
    site_config: str
    #: GPUs (generic resource gpu:N)
    gpus: Annotated[int, Meta(ge=0)] = 0
    #: time limit in minutes
    time_minutes: Annotated[int, _POSITIVE] | None = None
    #: candidate partitions in preference order; empty: Slurm's
    partitions: tuple[str, ...] = ()
    #: run in a verified snapshot of this candidate
    candidate: RecordedCandidate | None = None

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


class SrunRequest(SlurmRequestBase, frozen=True, kw_only=True):
    """A foreground srun job on a submit node."""

    #: time limit in whole minutes
    time_minutes: Annotated[int, _POSITIVE]


class SbatchRequest(SlurmRequestBase, frozen=True, kw_only=True):
    """A batch job: the trusted evaluation path, sized by the request and [slurm] (its
    sbatch_arguments), never by [vibesys.agent_gpu]."""

    #: time limit in whole minutes; None: the partition's default (or one in sbatch_arguments)
    time_minutes: Annotated[int, _POSITIVE] | None = None
    #: start once this job succeeds
    after: Dependency | None = None

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
        return SbatchRequest.checked(
            **common,
            gpus=trusted.gpus,
            time_minutes=trusted.time_minutes,
            partitions=trusted.partitions,
            after=after or None,
        )
    checked = check_sizing(person, loaded.config.agent_gpu)
    return SrunRequest.checked(
        **common,
        gpus=checked.gpus,
        time_minutes=checked.time_minutes,
        partitions=checked.partitions,
    )
