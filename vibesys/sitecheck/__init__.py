"""`vibesys check`: is a site ready for vibesys? One typed row per check, with the fix.

    from vibesys.sitecheck import load_slurm_site, run_site_checks

    report = run_site_checks(load_slurm_site("slurm.toml"))
    if report.failed:                      # refuse to start, naming the check
        raise SystemExit(report.failure_summary())

`load_slurm_site(path)` reads a slurm.toml and `load_skypilot_site(profile, clusters_path)`
a profile of clusters.toml (both raise ConfigError, one line, for bad input);
`run_site_checks(site, options)` runs every check of that site and returns a `CheckReport`
(`rows`, `failed`, `warnings`, `overall`, `exit_status`, `to_json()`); it never raises for
what it finds, and each check has a time limit (`CheckOptions`). The checks reach the site
through its own configuration (the Slurm transport; SkyPilot's login node), never through this
host's shared connection, and leave nothing behind: the compute-node job is cancelled if it is
still queued, and the check's directories are removed.

Depends on config and adapters only (never the journal or the engine): a check records nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from vibesys.adapters.skypilot.environment import SkyEnvironment
from vibesys.config.load import default_slurm_config_path, load_slurm_config
from vibesys.config.profiles import (
    default_clusters_config_path,
    load_clusters_config,
    select_profile,
)
from vibesys.errors import BackendMisconfigured, ConfigError
from vibesys.sitecheck.model import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    CheckReport,
    CheckRow,
    Status,
    render_text,
)
from vibesys.sitecheck.options import CheckOptions
from vibesys.sitecheck.runner import run_checks
from vibesys.sitecheck.skypilot import SkyPilotChecks, SkyPilotSite
from vibesys.sitecheck.slurm import SlurmChecks, SlurmSite

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_FAILED",
    "EXIT_OK",
    "CheckOptions",
    "CheckReport",
    "CheckRow",
    "Site",
    "SkyPilotSite",
    "SlurmSite",
    "Status",
    "load_skypilot_site",
    "load_slurm_site",
    "render_text",
    "run_site_checks",
]

Site = SlurmSite | SkyPilotSite


def load_slurm_site(path: str | os.PathLike[str] | None = None) -> SlurmSite:
    """The Slurm site of a slurm.toml (default ~/.config/vibesys/slurm.toml)."""
    file = Path(path).expanduser() if path is not None else default_slurm_config_path()
    return SlurmSite(load_slurm_config(file), str(file))


def load_skypilot_site(
    profile: str,
    clusters_path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> SkyPilotSite:
    """The SkyPilot site of `[profiles.PROFILE]` in clusters.toml (default
    ~/.config/vibesys/clusters.toml), with SkyPilot found through `environ` (default: this
    process's environment: VIBESYS_SKY_VENV, VIBESYS_SKY_HOME, VIBESYS_SKY_LOGIN)."""
    file = Path(clusters_path).expanduser() if clusters_path else default_clusters_config_path()
    source = str(file)
    chosen = select_profile(load_clusters_config(file), profile, source=source)
    try:
        environment = SkyEnvironment.from_environ(environ)
    except BackendMisconfigured as exc:
        raise ConfigError(str(exc)) from None
    return SkyPilotSite(profile, chosen, source, environment)


def run_site_checks(site: Site, options: CheckOptions | None = None) -> CheckReport:
    """Every check of `site`, in order; see the module docstring."""
    chosen = options or CheckOptions()
    checks: SlurmChecks | SkyPilotChecks
    if isinstance(site, SlurmSite):
        checks, kind, name = SlurmChecks(site, chosen), "slurm", site.config.slurm.name
    else:
        checks, kind, name = SkyPilotChecks(site, chosen), "skypilot", site.name
    try:
        rows = run_checks(checks.checks())
    finally:
        checks.close()
    return CheckReport(kind, name, site.source, rows)
