"""The profile a SkyPilot invocation runs with is its recorded site configuration: built from
the rendering recorded at PREPARED whatever becomes of clusters.toml, and moved to another
compatible profile only explicitly (`read_site_from`, what `vibesys journal config --replace
FILE --profile NAME` records), never by a variable every process reads."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from tests.helpers.skyfake import profile_toml
from vibesys.adapters.skypilot import SkyEnvironment, SkyPilotBackend, build_backend
from vibesys.adapters.skypilot.request import SkyPilotRequest, make_request
from vibesys.adapters.transports import LocalTransport
from vibesys.config.resources import PortableResources
from vibesys.errors import ConfigError, UsageError

ROCM = {"accelerator_backend": "rocm", "accelerator_type": "MI300A"}


def _request(tmp_path: Path) -> SkyPilotRequest:
    root = tmp_path / "remote"
    config = tmp_path / "clusters.toml"
    config.write_text(
        profile_toml(root, "launched", accelerators_per_node=4, **ROCM)
        + profile_toml(root, "bigger", accelerators_per_node=8, cpus_per_node=4, **ROCM)
        + profile_toml(root, "too-small", accelerators_per_node=1, **ROCM)
        + profile_toml(root, "cpu-only")
    )
    resources = PortableResources(accelerators_per_node=2, accelerator_backend="rocm")
    request = SkyPilotRequest(
        clusters_config=str(config), profile="launched", run_id="c7", resources=resources
    )
    return request.with_site(request.read_site())


def _build(request: SkyPilotRequest, tmp_path: Path) -> SkyPilotBackend:
    """Nothing is run: the profile is read and checked when the adapter is built."""
    environment = SkyEnvironment(venv=tmp_path / "sky-venv")
    return build_backend(request, environment, files=LocalTransport())


def test_the_recorded_profile_serves_whatever_becomes_of_the_file(tmp_path: Path) -> None:
    request = _request(tmp_path)
    before = _build(request, tmp_path)
    assert before.effective.profile == "launched"
    assert (before.effective.accelerators_per_node, before.effective.cpus_per_node) == (2, 1)
    config = Path(request.clusters_config)
    config.write_text(profile_toml(tmp_path / "elsewhere", "launched", cpus_per_node=64, **ROCM))
    assert _build(request, tmp_path).effective == before.effective
    config.unlink()
    after = _build(request, tmp_path)
    assert (after.effective, after.cluster) == (before.effective, before.cluster)


def test_only_a_request_recorded_before_sites_were_reads_its_file(tmp_path: Path) -> None:
    legacy = msgspec.structs.replace(_request(tmp_path), site_record=None)
    assert _build(legacy, tmp_path).effective.profile == "launched"
    Path(legacy.clusters_config).unlink()
    with pytest.raises(Exception, match="no such file"):
        _build(legacy, tmp_path)


def test_an_explicit_replacement_may_name_another_compatible_profile(tmp_path: Path) -> None:
    request = _request(tmp_path)
    first = _build(request, tmp_path)
    moved = request.with_site(request.read_site_from(request.clusters_config, "bigger"))
    other = _build(moved, tmp_path)
    # The request is untouched; what is launched follows the profile recorded now.
    assert (moved.profile, moved.resources.accelerators_per_node) == ("launched", 2)
    assert (other.effective.profile, other.effective.cpus_per_node) == ("bigger", 4)
    assert other.effective.accelerators_per_node == 2  # the request's, within the new limit
    assert other.cluster != first.cluster  # another launch shape: another cluster
    assert moved.backend_key() != request.backend_key()


@pytest.mark.parametrize(
    ("profile", "detail"),
    [
        ("too-small", "accelerators_per_node = 2, profile allows at most 1"),
        ("cpu-only", "accelerator_backend = 'rocm', profile offers 'none'"),
        ("nosuch", "no profile 'nosuch' (profiles: bigger, cpu-only, launched, too-small)"),
    ],
)
def test_an_incompatible_or_unknown_replacement_is_refused(
    tmp_path: Path, profile: str, detail: str
) -> None:
    request = _request(tmp_path)
    with pytest.raises((UsageError, ConfigError)) as refused:
        request.read_site_from(request.clusters_config, profile)
    assert detail in str(refused.value)


def test_the_retired_profile_variable_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    request = _request(tmp_path)
    monkeypatch.setenv("VIBESYS_SKY_PROFILE", "bigger")
    values = {"profile": "launched", "run_id": "c7", "clusters_config": request.clusters_config}
    with pytest.raises(UsageError, match=r"VIBESYS_SKY_PROFILE is no longer read.*--replace"):
        make_request("skypilot", values)
