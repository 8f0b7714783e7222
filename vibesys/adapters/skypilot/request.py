"""The typed request the SkyPilot adapter stores in the journal (one per invocation), and how
`vibesys run --adapter skypilot` builds it.

It holds the portable request (`[resources]`), the profile's name, the campaign (run) id and
the declared artifacts, never the profile's content: the effective profile is launch
provenance (recorded with the cluster lease and each attempt), and a resumed run may name
another compatible profile (VIBESYS_SKY_PROFILE). Everything is checked before anything is
recorded: the profile file, the profile, whether it can serve the request, the workdir, and
the SkyPilot installation's version.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator

from vibesys.adapters.listing import check_pattern
from vibesys.adapters.requests import AdapterRequest
from vibesys.config.profiles import (
    default_clusters_config_path,
    load_clusters_config,
    load_resources_table,
    parse_resources,
    select_profile,
)
from vibesys.config.resources import PortableResources, resolve_resources
from vibesys.errors import UsageError

__all__ = ["SkyPilotRequest", "make_request"]

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class SkyPilotRequest(AdapterRequest):
    """An evaluation on a campaign's SkyPilot cluster."""

    clusters_config: str = Field(
        min_length=1, description="The operator's profiles file (clusters.toml), absolute."
    )
    profile: str = Field(
        min_length=1, description="Operator profile chosen at launch ([profiles.NAME])."
    )
    run_id: str = Field(
        min_length=1,
        max_length=200,
        description="Campaign/run id: with the resources, it names the campaign's cluster.",
    )
    resources: PortableResources = Field(
        default_factory=PortableResources, description="The experiment's [resources]."
    )
    workdir: str | None = Field(
        default=None,
        min_length=1,
        description="Local directory synced to the cluster before each evaluation (sky exec "
        "--workdir); the command runs in a private copy of it.",
    )
    down: bool = Field(
        default=False,
        description="Release the campaign's cluster once this evaluation is DONE and no other "
        "evaluation runs on it (the campaign's last one).",
    )

    @field_validator("run_id")
    @classmethod
    def _run_id(cls, value: str) -> str:
        if not _RUN_ID.match(value):
            raise ValueError(f"{value!r}: use letters, digits, . _ -")
        return value

    @field_validator("artifacts")
    @classmethod
    def _artifacts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            if not pattern or pattern.startswith("/") or ".." in pattern.split("/"):
                raise ValueError(f"{pattern!r}: a relative glob inside the work directory")
        return value

    def backend_key(self) -> str:
        """One adapter instance per campaign cluster: the same profile file, profile, run id
        and resources give the same cluster."""
        return json.dumps(
            [self.clusters_config, self.profile, self.run_id, self.resources.model_dump()],
            sort_keys=True,
        )


def make_request(adapter: str, values: Mapping[str, Any]) -> SkyPilotRequest:
    """Check `vibesys run`'s options for the skypilot adapter; UsageError/ConfigError (one
    line naming the option or key) otherwise. Nothing is recorded before this returns."""
    from vibesys.adapters.skypilot.boundary import SkyCli
    from vibesys.adapters.skypilot.environment import SkyEnvironment

    profile = values.get("profile")
    if not profile:
        raise UsageError(
            "the skypilot adapter needs --profile NAME (a [profiles.NAME] of clusters.toml)"
        )
    run_id = values.get("run_id")
    if not run_id:
        raise UsageError(
            "the skypilot adapter needs --run-id ID (the campaign: evaluations "
            "with the same id share one cluster)"
        )
    path = Path(values.get("clusters_config") or default_clusters_config_path())
    path = path.expanduser().resolve()
    config = load_clusters_config(path)
    # The experiment file's [resources] (if any), each flag given overriding its key.
    experiment = values.get("resources_file")
    table = load_resources_table(experiment) if experiment is not None else {}
    table.update(
        (key, values[key])
        for key in ("nodes", "accelerators_per_node", "accelerator_backend")
        if values.get(key) is not None
    )
    source = f"{experiment} [resources]" if experiment is not None else "[resources]"
    resources = parse_resources(table, source=source)
    resolve_resources(resources, select_profile(config, str(profile), source=str(path)), profile)
    workdir = values.get("workdir")
    if workdir is not None and not Path(workdir).is_dir():
        raise UsageError(f"--workdir {workdir}: not a directory")
    try:
        request = SkyPilotRequest(
            clusters_config=str(path),
            profile=str(profile),
            run_id=str(run_id),
            resources=resources,
            workdir=str(Path(workdir).resolve()) if workdir is not None else None,
            down=bool(values.get("down")),
            artifacts=tuple(check_pattern(p) for p in values.get("artifact") or ()),
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "--" + str(first["loc"][0]).replace("_", "-") if first["loc"] else "request"
        raise UsageError(f"{where}: {first['msg']}") from None
    # At startup: refuse any SkyPilot but the pinned one, before anything is recorded.
    environment = SkyEnvironment.from_environ()
    SkyCli(venv=environment.venv, env=environment.sky_env()).check_version()
    return request
