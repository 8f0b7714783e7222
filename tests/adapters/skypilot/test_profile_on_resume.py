"""A resumed run may name another compatible profile (VIBESYS_SKY_PROFILE): the journal keeps
the portable request and the profile chosen at launch; the profile actually used is provenance."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.skyfake import profile_toml
from vibesys.adapters.skypilot import SkyEnvironment, SkyPilotBackend, build_backend
from vibesys.adapters.skypilot.errors import SkyProfileError
from vibesys.adapters.skypilot.request import SkyPilotRequest
from vibesys.adapters.transports import LocalTransport
from vibesys.config.resources import PortableResources

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
    return SkyPilotRequest(
        clusters_config=str(config), profile="launched", run_id="c7", resources=resources
    )


def _build(request: SkyPilotRequest, tmp_path: Path, profile: str | None) -> SkyPilotBackend:
    """Nothing is run: the profile is read and checked when the adapter is built."""
    environment = SkyEnvironment(venv=tmp_path / "sky-venv", profile=profile)
    return build_backend(request, environment, files=LocalTransport())


def test_the_recorded_profile_serves_by_default(tmp_path: Path) -> None:
    request = _request(tmp_path)
    backend = _build(request, tmp_path, None)
    assert backend.effective.profile == "launched"
    assert (backend.effective.accelerators_per_node, backend.effective.cpus_per_node) == (2, 1)


def test_a_resumed_run_may_name_another_compatible_profile(tmp_path: Path) -> None:
    request = _request(tmp_path)
    first, other = _build(request, tmp_path, None), _build(request, tmp_path, "bigger")
    # The request is untouched; what is launched follows the profile named now.
    assert (request.profile, request.resources.accelerators_per_node) == ("launched", 2)
    assert (other.effective.profile, other.effective.cpus_per_node) == ("bigger", 4)
    assert other.effective.accelerators_per_node == 2  # the request's, within the new limit
    assert other.cluster != first.cluster  # another launch shape: another cluster


@pytest.mark.parametrize(
    ("profile", "detail"),
    [
        ("too-small", "accelerators_per_node = 2, profile allows at most 1"),
        ("cpu-only", "accelerator_backend = 'rocm', profile offers 'none'"),
        ("nosuch", "no profile 'nosuch' (profiles: bigger, cpu-only, launched, too-small)"),
    ],
)
def test_an_incompatible_or_unknown_profile_is_refused_with_the_fix(
    tmp_path: Path, profile: str, detail: str
) -> None:
    with pytest.raises(SkyProfileError) as refused:
        _build(_request(tmp_path), tmp_path, profile)
    assert detail in str(refused.value)
    assert "VIBESYS_SKY_PROFILE" in refused.value.fix
    assert not refused.value.maybe_submitted and not refused.value.retryable
