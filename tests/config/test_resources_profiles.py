"""Portable [resources], operator profiles (clusters.toml) and the rule that joins them."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from vibesys.adapters.skypilot.request import SkyPilotRequest
from vibesys.config.profiles import (
    load_clusters_config,
    parse_clusters_config,
    parse_resources,
    select_profile,
)
from vibesys.config.resources import (
    IncompatibleProfile,
    PortableResources,
    SkyPilotProfile,
    expand_remote_root,
    resolve_resources,
)
from vibesys.config.site import profile_site
from vibesys.errors import ConfigError
from vibesys.strict_decode import decode

EXAMPLE = """
[profiles.gpu-site]
runner = "skypilot"
infra = "slurm/site-a/gpu"
accelerator_backend = "rocm"
accelerator_type = "GPU-X"
accelerators_per_node = 4
cpus_per_node = 64
exclusive = true
command_prefix = ["srun", "--overlap", "--environment=/env/runtime.toml"]
allocation_time = "08:00:00"
remote_artifact_root = "/scratch/$USER/vibesys"

[profiles.cpu-only]
runner = "skypilot"
infra = "slurm/site-b"
allocation_time = "1-00:00:00"
remote_artifact_root = "${HOME}/vibesys"
"""


def profile(name: str = "gpu-site") -> SkyPilotProfile:
    return select_profile(parse_clusters_config(EXAMPLE), name)


def test_example_profiles_parse() -> None:
    config = parse_clusters_config(EXAMPLE)
    assert sorted(config.profiles) == ["cpu-only", "gpu-site"]
    gpu = config.profiles["gpu-site"]
    assert gpu.command_prefix == ("srun", "--overlap", "--environment=/env/runtime.toml")
    assert config.profiles["cpu-only"].exclusive is False


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ('runner = "modal"', "runner"),
        ('infra = "slurm/a b"', "infra"),
        ('allocation_time = "8h"', "allocation_time"),
        ('allocation_time = "00:00:30"', "at least one minute"),
        ('remote_artifact_root = "relative/path"', "absolute"),
        ('remote_artifact_root = "/x/$(id)"', "only $USER and $HOME"),
        ("accelerators_per_node = -1", "accelerators_per_node"),
        ('accelerators_per_node = "4"', "accelerators_per_node"),
        ('partition = "gpu"', "partition: unknown key"),
    ],
)
def test_bad_profiles_fail_with_one_line_naming_the_key(change: str, message: str) -> None:
    key = change.split(" = ")[0]
    head, _, tail = EXAMPLE.partition("[profiles.cpu-only]\n")
    kept = [line for line in tail.splitlines() if not line.startswith(f"{key} =")]
    text = head + "[profiles.cpu-only]\n" + "\n".join([change, *kept]) + "\n"
    with pytest.raises(ConfigError) as caught:
        parse_clusters_config(text, source="clusters.toml")
    text = str(caught.value)
    assert text.startswith("clusters.toml: profiles.cpu-only") and message in text
    assert "\n" not in text


def test_unknown_profile_names_the_known_ones(tmp_path: Path) -> None:
    path = tmp_path / "clusters.toml"
    path.write_text(EXAMPLE)
    with pytest.raises(ConfigError, match=r"no profile 'x' \(profiles: cpu-only, gpu-site\)"):
        select_profile(load_clusters_config(path), "x")
    with pytest.raises(ConfigError, match="no such file"):
        load_clusters_config(tmp_path / "missing.toml")


def test_resources_are_strict() -> None:
    assert parse_resources({"nodes": 2}).nodes == 2
    for bad in ({"gpus": 1}, {"nodes": 0}, {"nodes": "2"}, {"accelerator_backend": "ROCm!"}):
        with pytest.raises(ConfigError, match=r"^\[resources\]: "):
            parse_resources(bad)


def test_a_profile_fills_what_the_request_leaves_open() -> None:
    effective = resolve_resources(PortableResources(), profile(), "gpu-site")
    assert (effective.accelerators_per_node, effective.accelerator_type) == (4, "GPU-X")
    assert effective.profile == "gpu-site" and effective.nodes == 1
    assert effective.allocation_time == "08:00:00"


def test_a_profile_constrains_what_the_request_asks() -> None:
    fewer = resolve_resources(PortableResources(accelerators_per_node=2), profile(), "gpu-site")
    assert fewer.accelerators_per_node == 2
    none = resolve_resources(PortableResources(accelerators_per_node=0), profile(), "gpu-site")
    assert none.accelerators_per_node == 0 and none.accelerator_type is None


@pytest.mark.parametrize(
    ("request_values", "name", "message"),
    [
        (
            {"accelerators_per_node": 8},
            "gpu-site",
            "accelerators_per_node = 8, profile allows at most 4",
        ),
        (
            {"accelerator_backend": "cuda"},
            "gpu-site",
            "accelerator_backend = 'cuda', profile offers 'rocm'",
        ),
        ({"accelerators_per_node": 1}, "cpu-only", "profile has no accelerators"),
        ({"accelerator_backend": "rocm"}, "cpu-only", "profile offers 'none'"),
    ],
)
def test_incompatible_pairs_fail_clearly(
    request_values: dict[str, object], name: str, message: str
) -> None:
    with pytest.raises(IncompatibleProfile) as caught:
        resolve_resources(decode(request_values, PortableResources), profile(name), name)
    assert f"profile {name!r} cannot serve [resources]" in str(caught.value)
    assert message in str(caught.value)


def test_a_profile_with_accelerators_but_no_type_cannot_serve_them() -> None:
    untyped = profile().model_copy(update={"accelerator_type": None})
    with pytest.raises(IncompatibleProfile, match="sets no accelerator_type"):
        resolve_resources(PortableResources(), untyped, "gpu-site")


def test_remote_root_expansion() -> None:
    assert expand_remote_root("/scratch/$USER/v", "ana", "/home/ana") == "/scratch/ana/v"
    assert expand_remote_root("${HOME}/v", "ana", "/home/ana") == "/home/ana/v"
    assert expand_remote_root("/x/$USERS", "ana", "/h") == "/x/$USERS"


def test_the_journal_request_is_strict_and_names_no_site() -> None:
    request = SkyPilotRequest(
        clusters_config="/etc/c.toml",
        profile="gpu-site",
        run_id="campaign-7",
        artifacts=("out/*.json",),
        resources=PortableResources(nodes=2),
    )
    assert msgspec.json.decode(msgspec.json.encode(request), type=SkyPilotRequest) == request
    # The journal stores the JSON form and reads it back as a dict.
    stored = request.recorded()
    assert decode(stored, SkyPilotRequest) == request
    assert sorted(stored) == [
        "artifacts", "candidate", "clusters_config", "down", "job_name_prefix", "pass_env",
        "profile", "resources", "run_id", "workdir",
    ]  # fmt: skip
    # The profile's content is the recorded site, kept apart (by digest), never in the JSON.
    recorded = request.with_site(profile_site("gpu-site", profile()))
    assert recorded.recorded() == stored
    assert stored["resources"] == {
        "nodes": 2, "accelerators_per_node": None, "accelerator_backend": None,
    }  # fmt: skip
    base = {"clusters_config": "/c.toml", "profile": "p", "run_id": "r"}
    for bad in ({"run_id": "a b"}, {"artifacts": ["../x"]}, {"partition": "gpu"}):
        with pytest.raises(ValueError):
            decode({**base, **bad}, SkyPilotRequest)


def test_one_backend_per_campaign_cluster() -> None:
    base = {"clusters_config": "/c.toml", "profile": "p", "run_id": "r"}
    one = decode({**base, "artifacts": ["a"]}, SkyPilotRequest)
    same = decode({**base, "workdir": "/w"}, SkyPilotRequest)
    assert one.backend_key() == same.backend_key()
    for other in ({"run_id": "r2"}, {"profile": "q"}, {"resources": {"nodes": 2}}):
        assert decode({**base, **other}, SkyPilotRequest).backend_key() != one.backend_key()
    # Another recorded rendering of the profile is another adapter instance.
    first = one.with_site(profile_site("p", profile()))
    moved = one.with_site(profile_site("p", profile().model_copy(update={"cpus_per_node": 9})))
    assert len({one.backend_key(), first.backend_key(), moved.backend_key()}) == 3
