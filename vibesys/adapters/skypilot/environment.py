"""Where this process finds SkyPilot: read from the environment of the vibesys process that
needs it (`run`, `wait`, `reconcile`, `clusters release` alike), never recorded in the journal.
Where and how evaluations run (the operator's profile) is not among them: that is recorded.

    VIBESYS_SKY_VENV           SkyPilot's own virtual environment (scripts/skypilot-env)
    VIBESYS_SKY_HOME           HOME for SkyPilot's client state (~/.sky, ~/.slurm/config);
                               default: this account's home
    VIBESYS_SKY_PORT           the local API server's port (SKYPILOT_API_SERVER_LOCAL_PORT)
    VIBESYS_SKY_BEFORE_LAUNCH  a site hook run before every launch, with the cluster name as
                               its last argument (e.g. to place tools a node cannot download)
    VIBESYS_SKY_LOGIN          how the remote attempt directories are reached: `ssh` (default:
                               the login node SkyPilot's ~/.slurm/config names for the infra) or
                               `local`
                               (vibesys runs where the cluster's shared file system is mounted)
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from msgspec import Struct

from vibesys.adapters.skypilot.boundary import default_venv
from vibesys.errors import BackendMisconfigured

__all__ = ["SkyEnvironment"]


class SkyEnvironment(Struct, frozen=True):
    venv: Path
    home: Path | None = None
    port: str | None = None
    before_launch: tuple[str, ...] = ()
    login: str = "ssh"

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> SkyEnvironment:
        env = os.environ if environ is None else environ
        venv = Path(env["VIBESYS_SKY_VENV"]).expanduser() if env.get("VIBESYS_SKY_VENV") else None
        home = env.get("VIBESYS_SKY_HOME")
        return cls(
            venv=venv or default_venv(),
            home=Path(home).expanduser() if home else None,
            port=env.get("VIBESYS_SKY_PORT") or None,
            before_launch=tuple(shlex.split(env.get("VIBESYS_SKY_BEFORE_LAUNCH", ""))),
            login=_login(env.get("VIBESYS_SKY_LOGIN") or "ssh"),
        )

    def sky_env(self) -> dict[str, str]:
        """Added to the environment of every `sky` command (and so of the API server the first
        one starts)."""
        env: dict[str, str] = {}
        if self.home is not None:
            env["HOME"] = str(self.home)
        if self.port is not None:
            env["SKYPILOT_API_SERVER_LOCAL_PORT"] = self.port
        return env

    def client_home(self) -> Path:
        return self.home if self.home is not None else Path.home()


def _login(value: str) -> str:
    if value not in ("ssh", "local"):
        raise BackendMisconfigured(
            f"VIBESYS_SKY_LOGIN={value!r}: use ssh or local",
            fix="set VIBESYS_SKY_LOGIN to ssh or local",
        )
    return value
