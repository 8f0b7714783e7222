"""The SkyPilot adapter: a campaign's SkyPilot cluster as its allocation lease, `sky exec` per
attempt, never `import sky` (see backend.py for the order the engine drives it in).

Pure parts: parse.py (CLI outputs), task.py + wrapper.py (what runs), naming.py, lease.py
(reuse decision), classify.py (RemoteStatus), provenance.py. Effects: boundary.py (the only
subprocess boundary), ops.py (one method per `sky` command), adapters/skypilot/run_dirs.py (the
remote attempt directories through the login node), backend.py. `build` joins the typed request, the
operator's profile and the environment (`environment.py`); the registry names this module.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from vibesys.adapters.skypilot.backend import SkyPilotBackend
from vibesys.adapters.skypilot.boundary import PINNED_VERSION, SkyCli
from vibesys.adapters.skypilot.environment import SkyEnvironment
from vibesys.adapters.skypilot.errors import SkyProfileError
from vibesys.adapters.skypilot.login import LazyLoginRunner, slurm_alias
from vibesys.adapters.skypilot.ops import SkyOps
from vibesys.adapters.skypilot.request import SkyPilotRequest, make_request
from vibesys.adapters.skypilot.run_dirs import RunDirs
from vibesys.adapters.transports import LocalTransport, Runner
from vibesys.config.profiles import load_clusters_config, recorded_profile, select_profile
from vibesys.config.resources import SkyPilotProfile, resolve_resources
from vibesys.errors import BackendMisconfigured, ConfigError, UsageError

__all__ = [
    "PINNED_VERSION",
    "Request",
    "SkyEnvironment",
    "SkyPilotBackend",
    "SkyPilotRequest",
    "build",
    "build_backend",
    "make_request",
]

#: The registry's name for this adapter's request model.
Request = SkyPilotRequest


def build(request: SkyPilotRequest) -> SkyPilotBackend:
    """The adapter for the campaign `request` names, set up from this process's environment."""
    return build_backend(request, SkyEnvironment.from_environ())


def build_backend(
    request: SkyPilotRequest,
    environment: SkyEnvironment,
    *,
    files: Runner | None = None,
    state_dir: Path | None = None,
    poll_seconds: tuple[float, float] = (10.0, 30.0),
) -> SkyPilotBackend:
    """The adapter for one campaign, with the profile recorded for it (`site_record`; only a
    request recorded before profiles were reads its file); `files` reaches the remote attempt
    directories (default: SSH to the login node of the profile's infra, as SkyPilot does)."""
    try:
        name, profile = _profile(request)
        effective = resolve_resources(request.resources, profile, name)
        identity = None
        if files is None and environment.login == "local":
            files = LocalTransport()
        elif files is None:
            slurm_alias(effective.infra)  # a profile whose infra names no login node: now
            files = LazyLoginRunner(effective.infra, environment.client_home())
            identity = files.identity_file
    except (ConfigError, UsageError) as exc:
        raise SkyProfileError(
            f"the skypilot request cannot be served: {exc}",
            fix="record a compatible profile: vibesys journal config INVOCATION --replace FILE "
            "--profile NAME",
        ) from None
    cli = SkyCli(venv=environment.venv, env=environment.sky_env(), verify_version=True)
    return SkyPilotBackend(
        effective=effective,
        run_id=request.run_id,
        ops=SkyOps(cli, identity=identity),
        dirs=RunDirs(files, effective.remote_artifact_root),
        state_dir=state_dir,
        before_launch=_hook(environment.before_launch),
        poll_seconds=poll_seconds,
    )


def _profile(request: SkyPilotRequest) -> tuple[str, SkyPilotProfile]:
    if request.site_record is not None:
        return recorded_profile(request.site_record)
    config = load_clusters_config(request.clusters_config)
    return request.profile, select_profile(config, request.profile, source=request.clusters_config)


def _hook(argv: tuple[str, ...]) -> _BeforeLaunch | None:
    return _BeforeLaunch(argv) if argv else None


class _BeforeLaunch:
    """The site's before-launch hook: ARGV... CLUSTER, which must exit 0."""

    def __init__(self, argv: tuple[str, ...]) -> None:
        self.argv = argv

    def __call__(self, cluster: str) -> None:
        try:
            done = subprocess.run(
                [*self.argv, cluster], capture_output=True, text=True, timeout=600, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BackendMisconfigured(
                f"the before-launch hook could not run: {exc}",
                fix="check VIBESYS_SKY_BEFORE_LAUNCH",
            ) from None
        if done.returncode != 0:
            tail = " ".join((done.stderr or done.stdout).split())[-300:]
            raise BackendMisconfigured(
                f"the before-launch hook exited {done.returncode}: {tail}",
                fix="check VIBESYS_SKY_BEFORE_LAUNCH",
            )
