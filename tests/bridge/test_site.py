"""The session's site is read and rendered once, when it starts: every evaluation's request
gets that rendering, whatever its file says later (edited, broken, deleted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vibesys.adapters.requests import ArtifactLimits, recorded_limits
from vibesys.adapters.slurm.request import SbatchRequest
from vibesys.bridge.site import resolve_site
from vibesys.config.resources import PortableResources
from vibesys.osutil.artifact_walk import Limits
from vibesys.strict_decode import decode


def site_text(name: str, root: Path) -> str:
    return (
        f'[slurm]\nname = "{name}"\nremote_workspace_root = "{root}"\n\n'
        '[slurm.transport]\nkind = "local"\n'
    )


@pytest.mark.parametrize("change", ["edited", "broken", "deleted"])
def test_evaluations_keep_the_site_the_session_started_with(tmp_path: Path, change: str) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "eval.py").write_text("print(1)\n")
    config = tmp_path / "slurm.toml"
    config.write_text(site_text("first", tmp_path / "remote"))
    site = resolve_site(
        run_id="campaign-1",
        workspace=str(workspace),
        resources=PortableResources(),
        slurm_config=config,
    )
    assert site.cluster == "first" and site.slurm_rendering is not None
    if change == "edited":
        config.write_text(site_text("second", tmp_path / "elsewhere"))
    elif change == "broken":
        config.write_text("[slurm\n")
    else:
        config.unlink()
    # The job's limit is whole minutes, rounded up: vibesys itself ends it at the second.
    for timeout, minutes in ((8, 1), (60, 1), (75, 2), (600, 10), (601, 11)):
        request = site.request(str(workspace), timeout, ("out/*",))
        assert isinstance(request, SbatchRequest)
        assert request.site_record == site.slurm_rendering
        assert request.site().slurm.name == "first"
        assert str(request.site().slurm.remote_workspace_root) == str(tmp_path / "remote")
        assert request.site_config == str(config.resolve())
        assert request.time_minutes == minutes and request.artifacts == ("out/*",)


def test_a_local_site_confines_its_evaluations_unless_the_operator_said_otherwise(
    tmp_path: Path,
) -> None:
    from vibesys.adapters.local_request import Confinement, LocalRequest
    from vibesys.errors import UsageError

    def local(**given: bool) -> tuple[LocalRequest, object]:
        site = resolve_site(
            run_id="c", workspace=str(tmp_path), resources=PortableResources(), local=True, **given
        )
        request = site.request(str(tmp_path), 60, ())
        assert isinstance(request, LocalRequest)
        return request, site.capabilities()["local_confined"]

    request, confined = local()
    assert (request.confine, confined) == (Confinement(read_only_paths=(), home="/tmp"), True)
    request, confined = local(unconfined=True)
    assert (request.confine, confined) == (None, False)
    with pytest.raises(UsageError, match="--unconfined applies to --local only"):
        resolve_site(
            run_id="c",
            workspace=str(tmp_path),
            resources=PortableResources(),
            profile="p",
            unconfined=True,
        )


def test_a_sessions_artifact_limits_are_recorded_with_each_request(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    config = tmp_path / "slurm.toml"
    config.write_text(site_text("first", tmp_path / "remote"))
    site = resolve_site(
        run_id="campaign-1",
        workspace=str(workspace),
        resources=PortableResources(),
        slurm_config=config,
    )
    limits = Limits(max_file_bytes=5, max_total_bytes=9, max_entries=7, max_seconds=1.5)
    request = site.request(str(workspace), 60, ("out/*",), (), ArtifactLimits.of(limits))
    stored = request.recorded()
    assert stored["artifact_limits"] == limits._asdict()
    # What every later process reads back from the journal: the same limits.
    assert recorded_limits(stored["artifact_limits"]) == limits
    assert decode(stored, SbatchRequest).artifact_limits == request.artifact_limits
    # A request that records none is stored as before, and gets the defaults.
    plain = site.request(str(workspace), 60, ("out/*",)).recorded()
    assert "artifact_limits" not in plain
    assert recorded_limits(plain.get("artifact_limits")) is None
    with pytest.raises(ValueError, match="unknown field"):
        recorded_limits({**limits._asdict(), "max_depth": 3})
