"""What the operator chose for one candidate session (`vibesys session serve`'s options, the
site already resolved)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from vibesys.adapters.rundir.listing import DEFAULT_LIMITS
from vibesys.bridge.site import Site, resolve_site
from vibesys.config.profiles import load_resources_table, parse_resources
from vibesys.config.resources import PortableResources
from vibesys.journal_schema import journal_path
from vibesys.osutil.artifact_walk import Limits

__all__ = ["SessionOptions", "artifact_limits", "session_options"]


class SessionOptions(msgspec.Struct, frozen=True, kw_only=True):
    run_id: str
    workspace: Path
    site: Site
    journal: Path
    state_dir: Path | None = None
    results_dir: Path | None = None
    allow_env: tuple[str, ...] = ()
    allow_uids: tuple[int, ...] = ()
    default_timeout: int = 3600
    max_timeout: int = 86400
    max_retries: int = 2
    teardown_seconds: float = 120.0
    parent_pid: int | None = None
    down: bool = False
    #: run `vibesys check` first and refuse to start on a failure
    check_site: bool = True
    #: what each evaluation's artifacts may be (recorded with its request)
    artifact_limits: Limits = DEFAULT_LIMITS


def artifact_limits(max_bytes: int | None, max_total_bytes: int | None) -> Limits:
    """The defaults with what the operator gave (the walk's own bounds are not options)."""
    limits = DEFAULT_LIMITS
    if max_bytes is not None:
        limits = limits._replace(max_file_bytes=max_bytes)
    if max_total_bytes is not None:
        limits = limits._replace(max_total_bytes=max_total_bytes)
    return limits


def session_options(
    *,
    run_id: str,
    workspace: Path,
    slurm_config: Path | None,
    profile: str | None,
    clusters_config: Path | None,
    local: bool,
    unconfined: bool,
    resources: Path | None,
    journal: Path | None,
    state_dir: Path | None,
    results_dir: Path | None,
    allow_env: list[str] | None,
    allow_uid: list[int] | None,
    default_timeout: int,
    max_timeout: int,
    max_retries: int,
    teardown_seconds: float,
    artifact_max: int | None,
    artifact_sum_max: int | None,
    parent_pid: int | None,
    down: bool,
    check: bool,
) -> SessionOptions:
    """`vibesys session serve`'s options, its site resolved (UsageError/ConfigError say why
    it cannot be)."""
    portable = (
        parse_resources(load_resources_table(resources), source=f"{resources} [resources]")
        if resources is not None
        else PortableResources()
    )
    site = resolve_site(
        run_id=run_id,
        workspace=str(workspace.expanduser().absolute()),
        resources=portable,
        slurm_config=slurm_config,
        clusters_config=clusters_config,
        profile=profile,
        local=local,
        unconfined=unconfined,
    )
    return SessionOptions(
        run_id=run_id,
        workspace=workspace,
        site=site,
        journal=journal_path(journal),
        state_dir=state_dir,
        results_dir=results_dir,
        allow_env=tuple(allow_env or ()),
        allow_uids=tuple(allow_uid or ()),
        default_timeout=default_timeout,
        max_timeout=max_timeout,
        max_retries=max_retries,
        teardown_seconds=teardown_seconds,
        artifact_limits=artifact_limits(artifact_max, artifact_sum_max),
        parent_pid=parent_pid,
        down=down,
        check_site=check,
    )
