"""`vibesys check`: is a site ready (as `sky check` is for clouds)? Thin: parse, run the checks
of `vibesys.sitecheck`, render. The checks load when the command runs (they reach the
adapters' transports)."""

# Annotations are values here, not strings: typer reads these signatures at every start, and
# a string would be compiled and evaluated again each time.

import json
from pathlib import Path
from typing import Annotated

import typer

from vibesys.errors import UsageError, boundary

SlurmConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--slurm-config",
        help="Check this Slurm site (slurm.toml; the default file when no --profile is given).",
    ),
]
ProfileOption = Annotated[
    str | None, typer.Option("--profile", help="Check this SkyPilot profile instead.")
]
ProfilesOption = Annotated[
    Path | None,
    typer.Option(
        "--profiles",
        "--clusters-config",
        help="The profiles file (default ~/.config/vibesys/clusters.toml).",
    ),
]


def check_command(
    slurm_config: SlurmConfigOption = None,
    profile: ProfileOption = None,
    profiles: ProfilesOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    timeout: Annotated[
        float, typer.Option(help="Seconds any one command, or the login, may take.")
    ] = 15.0,
    job_wait: Annotated[
        float, typer.Option(help="Seconds the compute-node job may take (queue and run).")
    ] = 60.0,
    cert_warn_days: Annotated[
        float, typer.Option(help="Warn when the SSH certificate expires within this many days.")
    ] = 7.0,
) -> None:
    """Check that a site is ready: one row per check (ok, warn, fail, skipped) with the fix.

    A Slurm site: the transport and host key, squeue, sbatch, scancel, sacct, the partitions
    and their limits, the controller's RPC limits, remote_workspace_root writable and seen at
    the same path by a tiny job on a compute node, bwrap there when GPU commands are on. A
    SkyPilot profile: the pinned SkyPilot, the login node, the SSH certificate's days left,
    remote_artifact_root writable. Exit 0 when no check failed, 1 when one did, 2 for bad
    input."""
    with boundary():
        from vibesys.sitecheck import (
            CheckOptions,
            Site,
            load_skypilot_site,
            load_slurm_site,
            render_text,
            run_site_checks,
        )

        if profile is not None and slurm_config is not None:
            raise UsageError("give --slurm-config or --profile, not both")
        if profiles is not None and profile is None:
            raise UsageError("--profiles needs --profile")
        for name, value in (("--timeout", timeout), ("--job-wait", job_wait)):
            if not value > 0:
                raise UsageError(f"{name} {value:g}: must be more than 0")
        if not cert_warn_days >= 0:
            raise UsageError(f"--cert-warn-days {cert_warn_days:g}: must not be negative")
        site: Site
        if profile is not None:
            site = load_skypilot_site(profile, profiles)
        else:
            site = load_slurm_site(slurm_config)
        options = CheckOptions(
            timeout_seconds=timeout, job_wait_seconds=job_wait, cert_warn_days=cert_warn_days
        )
        report = run_site_checks(site, options)
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
    else:
        typer.echo(render_text(report), nl=False)
    raise typer.Exit(report.exit_status)
