"""The SkyPilot adapter: a campaign's SkyPilot cluster as its allocation lease, `sky exec` per
attempt, never `import sky` (see backend.py for the order the engine drives it in).

Pure parts: parse.py (CLI outputs), task.py + wrapper.py (what runs), naming.py, lease.py
(reuse decision), classify.py (RemoteStatus). Effects: boundary.py (the only subprocess
boundary), ops.py (one method per `sky` command), rundirs.py (run directories through the login
node), backend.py. `build_backend` joins the typed request, the operator's profile and the
environment.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from vibesys.adapters.skypilot.backend import SkyPilotBackend
from vibesys.adapters.skypilot.boundary import PINNED_VERSION, SkyCli, default_venv
from vibesys.adapters.skypilot.lease import LeaseAction, LeasePlan, LeaseReceipt
from vibesys.adapters.skypilot.ops import SkyOps
from vibesys.adapters.skypilot.provenance import Provenance
from vibesys.adapters.skypilot.request import SkyPilotRequest
from vibesys.adapters.transports import Runner
from vibesys.config.profiles import load_clusters_config, select_profile
from vibesys.config.resources import resolve_resources

__all__ = [
    "PINNED_VERSION",
    "LeaseAction",
    "LeasePlan",
    "LeaseReceipt",
    "Provenance",
    "SkyPilotBackend",
    "SkyPilotRequest",
    "build_backend",
]


def build_backend(
    request: SkyPilotRequest,
    *,
    state_dir: Path,
    profile: str | None = None,
    clusters_config: str | os.PathLike[str] | None = None,
    sky_env: Mapping[str, str] | None = None,
    venv: Path | None = None,
    files: Runner | None = None,
    before_launch: Callable[[str], None] | None = None,
) -> SkyPilotBackend:
    """The adapter for one campaign. `profile` overrides the request's (a resumed run may name
    another compatible one); `sky_env` is added to every sky command's environment (HOME of
    SkyPilot's client state, SKYPILOT_API_SERVER_LOCAL_PORT); `files` reaches the run
    directories (default: SSH to the login node of the profile's infra, as SkyPilot does)."""
    name = profile or request.profile
    config = load_clusters_config(clusters_config)
    effective = resolve_resources(request.resources, select_profile(config, name), name)
    env = dict(sky_env or {})
    cli = SkyCli(venv=venv or default_venv(), env=env)
    if files is None:
        from vibesys.adapters.skypilot.login import login_runner

        home = Path(env.get("HOME") or Path.home())
        files = login_runner(effective.infra, home)
    from vibesys.adapters.skypilot.rundirs import RunDirs

    return SkyPilotBackend(
        effective=effective,
        run_id=request.run_id,
        ops=SkyOps(cli),
        dirs=RunDirs(files, effective.remote_artifact_root),
        state_dir=state_dir,
        workdir=request.workdir,
        before_launch=before_launch,
    )
