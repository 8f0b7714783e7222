"""The operator's site, resolved once when a session starts: which adapter runs the session's
evaluations, the typed request each one gets, the campaign's cluster name, and what the
session offers (`vibesys-eval capabilities`).

Three kinds of site, chosen by the trusted host side, never by a request:

- a Slurm site (`slurm.toml`): the sbatch path, `vibesys run --adapter sbatch --slurm-config F
  --gpus N --time M --candidate WORKSPACE --artifact ...`, sized by the experiment's
  `[resources]` (one node; the evaluation's timeout rounded up to whole minutes is the job's
  `--time`);
- a SkyPilot profile (`clusters.toml`, `[profiles.NAME]`): the campaign's cluster, named from
  the run id and the resources' fingerprint (the adapter's own naming), the workspace synced;
- this host (`--local`): a local process in a fresh copy of the candidate's snapshot, confined
  by bubblewrap to that copy and the system directories unless the operator said
  `--unconfined` (the confinement goes into each evaluation's recorded request).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec
from msgspec import structs

from vibesys.adapters.candidate import digest_candidate
from vibesys.adapters.local_request import Confinement, LocalRequest
from vibesys.adapters.requests import AdapterRequest, ArtifactLimits
from vibesys.adapters.skypilot.naming import cluster_name
from vibesys.adapters.skypilot.request import make_request
from vibesys.adapters.slurm import request as slurm_request
from vibesys.config.profiler import ProfilerConfig
from vibesys.config.profiles import load_clusters_config, select_profile
from vibesys.config.resources import EffectiveResources, PortableResources, resolve_resources
from vibesys.config.site import RecordedSite, slurm_site
from vibesys.config.slurm_file import SlurmSiteFile, load_site_file, warn_once
from vibesys.errors import UsageError

__all__ = ["Site", "resolve_site"]

Backend = Literal["local", "slurm", "skypilot"]


class Site(msgspec.Struct, frozen=True):
    backend: Backend
    #: the registry's adapter name
    adapter: str
    resources: PortableResources
    #: the SkyPilot cluster's name, the Slurm site's name, or None (this host)
    cluster: str | None = None
    slurm_config: Path | None = None
    #: the SkyPilot request every evaluation's is made from (artifacts aside)
    sky_request: AdapterRequest | None = None
    effective: EffectiveResources | None = None
    #: the Slurm site has `[vibesys.agent_gpu]`: the session starts the GPU broker too
    agent_gpu: bool = False
    #: the Slurm site's file as read when the session started, and its rendering: what every
    #: evaluation's request gets (the file is not read again)
    slurm_file: SlurmSiteFile | None = None
    slurm_rendering: RecordedSite | None = None
    #: this host's evaluations run confined so (None: with the host's view, `--unconfined`)
    confinement: Confinement | None = None

    def request(
        self,
        workspace: str,
        timeout_seconds: int,
        artifacts: tuple[str, ...],
        env_names: tuple[str, ...] = (),
        limits: ArtifactLimits | None = None,
        left_out: tuple[str, ...] = (),
    ) -> Any:
        """The typed adapter request of one evaluation (the candidate's digest computed now:
        the agent edits it between evaluations) that passes the variables `env_names` and
        records the artifacts' `limits` (a local one's are the bridge request's). The Slurm
        snapshot leaves out the patterns `left_out` besides its policy's (recorded with the
        candidate, so the stage leaves them out too). UsageError/ConfigError say why the
        site cannot take it."""
        if self.backend == "local":
            return LocalRequest(confine=self.confinement)
        if self.backend == "skypilot":
            assert self.sky_request is not None
            update: dict[str, Any] = {
                "artifacts": artifacts,
                "pass_env": tuple(sorted(env_names)),
                "artifact_limits": limits,
            }
            recorded = getattr(self.sky_request, "candidate", None)
            if recorded is not None:  # the snapshot as it is now, not as the session began
                update["candidate"] = digest_candidate(recorded.path, recorded.exclude)
            return structs.replace(self.sky_request, **update)

        assert self.slurm_file is not None
        values = {
            "gpus": self.resources.accelerators_per_node or 0,
            "time_minutes": max(1, math.ceil(timeout_seconds / 60)),
            "candidate": Path(workspace),
            "artifact": artifacts,
            "exclude": left_out,
        }
        # The passed variables reach an sbatch job with the recorded environment (sbatch's
        # own export), as a direct `vibesys run --adapter sbatch` job's do.
        made = slurm_request.request_from_site(
            "sbatch", values, self.slurm_file, self.slurm_rendering
        )
        return structs.replace(made, artifact_limits=limits)

    def profilers(self) -> Mapping[str, ProfilerConfig]:
        """The profilers a profile may name: the Slurm site's `[vibesys.agent_gpu.profilers]`
        (an evaluation's profile runs on the sbatch path; other sites offer none)."""
        agent = self.slurm_file.config.agent_gpu if self.slurm_file is not None else None
        return agent.profilers if self.backend == "slurm" and agent is not None else {}

    def capabilities(self) -> dict[str, Any]:
        """What an evaluation gets here, from the configuration (no scheduler is asked)."""
        found: dict[str, Any] = {"backend": self.backend, "cluster": self.cluster}
        # whether a local evaluation runs sandboxed (None: it runs elsewhere, not on this host)
        found["local_confined"] = self.confinement is not None if self.backend == "local" else None
        if self.effective is not None:
            found |= {
                "accelerator_type": self.effective.accelerator_type,
                "accelerators_per_node": self.effective.accelerators_per_node,
                "accelerator_backend": self.effective.accelerator_backend,
                "nodes": self.effective.nodes,
                "cpus_per_node": self.effective.cpus_per_node,
                "allocation_time": self.effective.allocation_time,
            }
        else:
            found |= {
                "accelerator_type": None,
                "accelerators_per_node": self.resources.accelerators_per_node or 0,
                "accelerator_backend": self.resources.accelerator_backend,
                "nodes": 1,
                "cpus_per_node": os.cpu_count() if self.backend == "local" else None,
                "allocation_time": None,
            }
        return found


def resolve_site(
    *,
    run_id: str,
    workspace: str,
    resources: PortableResources,
    slurm_config: Path | None = None,
    clusters_config: Path | None = None,
    profile: str | None = None,
    local: bool = False,
    unconfined: bool = False,
) -> Site:
    """The one site the options name; UsageError/ConfigError (one line naming the option or
    key) when they name none, several, or one that cannot serve `resources`."""
    named = (("--slurm-config", slurm_config), ("--profile", profile), ("--local", local))
    chosen = [name for name, given in named if given]
    if len(chosen) != 1:
        raise UsageError(
            "name one site: --slurm-config FILE (the sbatch path), --profile NAME (a SkyPilot "
            "profile of --clusters-config) or --local (this host)"
            + (f"; got {' and '.join(chosen)}" if chosen else "")
        )
    if clusters_config is not None and profile is None:
        raise UsageError("--clusters-config needs --profile NAME")
    if unconfined and not local:
        raise UsageError("--unconfined applies to --local only (other sites run elsewhere)")
    if local:
        # A local session has no operator file naming read_only_paths: the system directories.
        confinement = None if unconfined else Confinement()
        return Site("local", "local", resources, confinement=confinement)
    if slurm_config is not None:
        return _slurm_site(slurm_config, resources)
    assert profile is not None
    return _sky_site(run_id, workspace, resources, profile, clusters_config)


def _slurm_site(path: Path, resources: PortableResources) -> Site:

    config_path = path.expanduser().resolve()
    loaded = load_site_file(config_path)
    warn_once(loaded.warning)
    config = loaded.config
    if resources.nodes != 1:
        raise UsageError(
            f"[resources] nodes = {resources.nodes}: the sbatch path runs an evaluation on one "
            "node; use a SkyPilot profile for more"
        )
    return Site(
        "slurm",
        "sbatch",
        resources,
        cluster=config.slurm.name,
        slurm_config=config_path,
        agent_gpu=config.agent_gpu is not None,
        slurm_file=loaded,
        slurm_rendering=slurm_site(config),
    )


def _sky_site(
    run_id: str,
    workspace: str,
    resources: PortableResources,
    profile: str,
    clusters_config: Path | None,
) -> Site:

    values = {
        "profile": profile,
        "run_id": run_id,
        "clusters_config": clusters_config,
        "workdir": workspace,
        **{k: v for k, v in structs.asdict(resources).items() if v is not None},
    }
    request = make_request("skypilot", values)
    source = request.clusters_config
    chosen = select_profile(load_clusters_config(source), profile, source=source)
    effective = resolve_resources(request.resources, chosen, profile)
    return Site(
        "skypilot",
        "skypilot",
        resources,
        cluster=cluster_name(run_id, effective),
        sky_request=request,
        effective=effective,
    )
