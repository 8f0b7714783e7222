"""The typed request the SkyPilot adapter stores in the journal (one per invocation), and how
`vibesys run --adapter skypilot` builds it.

It holds the portable request (`[resources]`), the profile's name, the campaign (run) id, the
candidate (path, exclusions, digest) and the declared artifacts. The profile's content is the
invocation's recorded site configuration (its rendering, kept in the journal by digest): every
process that carries the invocation on uses it, and a resumed run moves to another compatible
profile only explicitly (`vibesys journal config INVOCATION --replace FILE --profile NAME`).
Everything is checked before anything is recorded: the profile file, the profile, whether it
can serve the request, the candidate, and the SkyPilot installation's version.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import msgspec
from msgspec import Meta, structs

from vibesys.adapters.candidate import RecordedCandidate, digest_candidate
from vibesys.adapters.requests import AdapterRequest
from vibesys.adapters.rundir.listing import check_pattern
from vibesys.adapters.skypilot.boundary import SkyCli
from vibesys.adapters.skypilot.environment import SkyEnvironment
from vibesys.config.profiles import (
    default_clusters_config_path,
    load_clusters_config,
    load_resources_table,
    parse_resources,
    select_profile,
)
from vibesys.config.resources import PortableResources, resolve_resources
from vibesys.config.site import RecordedSite, profile_site
from vibesys.errors import UsageError
from vibesys.strict_decode import where_and_why

__all__ = ["RETIRED_PROFILE_ENV", "SkyPilotRequest", "client_variable", "make_request"]

#: Once read by every process to resume with another profile: a silent re-read, retired.
RETIRED_PROFILE_ENV = "VIBESYS_SKY_PROFILE"

_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Passed values reach the job through `sky exec`'s own environment (`--secret NAME`: never on
#: a command line or in the task file), so a name the SkyPilot client itself reads would
#: change the client, not only the job.
_CLIENT_NAMES = frozenset(
    {"HOME", "PATH", "USER", "LOGNAME", "SHELL", "LANG", "TMPDIR", "VIRTUAL_ENV", "KUBECONFIG"}
)
_CLIENT_PREFIXES = ("SKYPILOT_", "VIBESYS_", "PYTHON", "LD_", "XDG_", "SSH_", "LC_")


_NOT_EMPTY = Meta(min_length=1)


class SkyPilotRequest(AdapterRequest, frozen=True, kw_only=True):
    """An evaluation on a campaign's SkyPilot cluster."""

    #: the operator's profiles file (clusters.toml), absolute
    clusters_config: Annotated[str, _NOT_EMPTY]
    #: operator profile chosen at launch ([profiles.NAME])
    profile: Annotated[str, _NOT_EMPTY]
    #: campaign/run id: with the resources, it names the campaign's cluster
    run_id: Annotated[str, Meta(min_length=1, max_length=200)]
    #: the experiment's [resources]
    resources: PortableResources = msgspec.field(default_factory=PortableResources)
    #: The candidate to run in: staged as a snapshot (the same policy and digest as the Slurm
    #: adapters'), verified on the cluster; the command runs in a private copy.
    candidate: RecordedCandidate | None = None
    #: Recorded before candidates were snapshots: the directory is staged through the same
    #: policy when it is submitted (its digest taken then).
    workdir: Annotated[str, _NOT_EMPTY] | None = None
    #: Names of variables of the invocation's recorded environment the job gets (their values
    #: are never recorded here; `sky exec --secret NAME`).
    pass_env: tuple[str, ...] = ()
    #: Release the campaign's cluster once this evaluation is DONE and no other evaluation
    #: runs on it (the campaign's last one).
    down: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not _RUN_ID.fullmatch(self.run_id):
            raise ValueError(f"run_id: {self.run_id!r}: use letters, digits, . _ -")
        for name in self.pass_env:
            if not _VARIABLE.fullmatch(name):
                raise ValueError(f"pass_env: {name!r}: not a variable name")
            reason = client_variable(name)
            if reason:
                raise ValueError(f"pass_env: {reason}")
        for pattern in self.artifacts:
            if not pattern or pattern.startswith("/") or ".." in pattern.split("/"):
                raise ValueError(
                    f"artifacts: {pattern!r}: a relative glob inside the work directory"
                )

    def campaign(self) -> str:
        """A campaign's evaluations share its cluster: one at a time, in order."""
        return self.run_id

    def backend_key(self) -> str:
        """One adapter instance per campaign cluster: the same profile (its recorded
        rendering), run id and resources give the same cluster."""
        recorded = self.site_record.digest if self.site_record is not None else ""
        return json.dumps(
            [
                self.clusters_config,
                self.profile,
                recorded,
                self.run_id,
                structs.asdict(self.resources),
            ],
            sort_keys=True,
        )

    def passed(self, env: Mapping[str, str]) -> dict[str, str]:
        """The variables of `pass_env` with their values from the recorded environment `env`
        (ValueError names one it lacks)."""
        missing = [name for name in self.pass_env if name not in env]
        if missing:
            raise ValueError(f"{missing[0]} is not in the invocation's recorded environment")
        return {name: env[name] for name in self.pass_env}

    def read_site(self) -> RecordedSite:
        return self.read_site_from(self.clusters_config)

    def read_site_from(self, path: str, profile: str | None = None) -> RecordedSite:
        """The profile `profile` (default: the one recorded) of the clusters.toml at `path`,
        which must serve the recorded portable request."""
        name = profile or self.profile
        chosen = select_profile(load_clusters_config(path), name, source=path)
        resolve_resources(self.resources, chosen, name)
        return profile_site(name, chosen)


def client_variable(name: str) -> str | None:
    """Why `name` cannot be passed to a SkyPilot job (the client reads it), or None."""
    if name in _CLIENT_NAMES or name.startswith(_CLIENT_PREFIXES):
        return f"{name}: the SkyPilot client reads it, so it cannot be passed to the job"
    return None


def make_request(adapter: str, values: Mapping[str, Any]) -> SkyPilotRequest:
    """Check `vibesys run`'s options for the skypilot adapter; UsageError/ConfigError (one
    line naming the option or key) otherwise. Nothing is recorded before this returns."""
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
    chosen = select_profile(config, str(profile), source=str(path))
    resolve_resources(resources, chosen, profile)
    if values.get("candidate") is not None and values.get("workdir") is not None:
        raise UsageError("--workdir is the old name of --candidate: give one of them")
    flag = "--workdir" if values.get("workdir") is not None else "--candidate"
    directory = values.get("candidate") or values.get("workdir")
    candidate = digest_candidate(directory, values.get("exclude") or (), flag=flag)
    if os.environ.get(RETIRED_PROFILE_ENV):
        raise UsageError(
            f"{RETIRED_PROFILE_ENV} is no longer read: a run keeps the profile it was recorded "
            "with; move one to another with `vibesys journal config INVOCATION --replace FILE "
            "--profile NAME`"
        )
    try:
        request = SkyPilotRequest.checked(
            clusters_config=str(path),
            profile=str(profile),
            run_id=str(run_id),
            resources=resources,
            candidate=candidate,
            down=bool(values.get("down")),
            artifacts=tuple(check_pattern(p) for p in values.get("artifact") or ()),
            site_record=profile_site(str(profile), chosen),
        )
    except msgspec.ValidationError as exc:
        where, why = where_and_why(exc)
        flag = "--" + where.split(".")[0].replace("_", "-") if where else "request"
        raise UsageError(f"{flag}: {why}") from None
    # At startup: refuse any SkyPilot but the pinned one, before anything is recorded.
    environment = SkyEnvironment.from_environ()
    SkyCli(venv=environment.venv, env=environment.sky_env()).check_version()
    return request
