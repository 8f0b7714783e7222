"""A session's capabilities are typed (every key the untyped reply had is kept), their JSON
Schema in docs/ is the model's, and the agent's runtime notes are rendered from them: golden for
a confined local site, a Slurm site with GPU commands, and a SkyPilot profile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bridge.helpers import Bridge
from tests.helpers.golden_files import assert_matches_golden
from tests.helpers.skyfake import make_fake_sky
from vibesys.bridge import client
from vibesys.bridge.capabilities import SessionCapabilities, session_capabilities
from vibesys.bridge.notes import render_notes
from vibesys.bridge.site import Site, resolve_site
from vibesys.config.resources import PortableResources

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "notes"
SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "capabilities.schema.json"
#: The workspace and results directory of a documented session (same paths in the container).
WORKSPACE = "/shared/runs/r1/cand-a"
RESULTS = Path("/var/tmp/vibesys/r1-cand-a/results")
#: The keys `vibesys-eval capabilities` printed before the reply was typed: a framework reads them.
OLD_KEYS = {
    "protocol_version",
    "run",
    "workspace",
    "backend",
    "cluster",
    "local_confined",
    "accelerator_type",
    "accelerators_per_node",
    "accelerator_backend",
    "nodes",
    "cpus_per_node",
    "allocation_time",
    "default_timeout_seconds",
    "max_timeout_seconds",
    "kinds",
    "env",
    "results_dir",
    "gpu_commands",
    "remote_profiling",
}

SLURM_SITE = """\
[slurm]
name = "site-a"
remote_workspace_root = "/shared/vibesys"
sbatch_arguments = ["--account=lab", "--partition=eval,eval-long", "--time=2:00:00"]

[slurm.transport]
kind = "local"

[vibesys.agent_gpu]
partitions = ["main", "priority"]
max_gpus = 8
max_time_minutes = 120
default_time_minutes = 30
read_only_paths = ["/opt/venvs/torch", "/opt/datasets/imagenet"]
max_concurrent_jobs = 4

[vibesys.agent_gpu.profilers.nsys]
command = ["nsys", "profile", "-o", "{capture}", "--"]
captures = ["{capture}.nsys-rep"]

[vibesys.agent_gpu.profilers.py-spy]
command = ["py-spy", "record", "--format", "speedscope", "-o", "{capture}.json", "--"]
captures = ["{capture}.json"]
"""

CLUSTERS = """\
[profiles.mi300]
runner = "skypilot"
infra = "slurm/beverin/mi300"
accelerator_backend = "rocm"
accelerator_type = "MI300A"
accelerators_per_node = 4
cpus_per_node = 192
allocation_time = "08:00:00"
remote_artifact_root = "/capstor/scratch/$USER/vibesys"
"""


def capabilities_of(site: Site) -> SessionCapabilities:
    return session_capabilities(
        site,
        run="campaign-7",
        workspace=WORKSPACE,
        default_timeout=3600,
        max_timeout=86400,
        env=("SEED", "DATA_VERSION"),
        results_dir=RESULTS,
    )


def local_site(monkeypatch: pytest.MonkeyPatch) -> Site:
    monkeypatch.setattr("os.cpu_count", lambda: 16)  # this host's count: the machine's
    return resolve_site(
        run_id="campaign-7", workspace=WORKSPACE, resources=PortableResources(), local=True
    )


def slurm_site(tmp_path: Path) -> Site:
    config = tmp_path / "slurm.toml"
    config.write_text(SLURM_SITE)
    resources = PortableResources(accelerators_per_node=1, accelerator_backend="cuda")
    return resolve_site(
        run_id="campaign-7", workspace=WORKSPACE, resources=resources, slurm_config=config
    )


def sky_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Site:
    # The request checks the SkyPilot install: the scripted fake's (nothing is launched).
    for name, value in make_fake_sky(tmp_path).env().items():
        monkeypatch.setenv(name, value)
    config = tmp_path / "clusters.toml"
    config.write_text(CLUSTERS)
    return resolve_site(  # the workspace is staged from: it must exist (the notes name WORKSPACE)
        run_id="campaign-7",
        workspace=str(tmp_path),
        resources=PortableResources(),
        profile="mi300",
        clusters_config=config,
    )


def test_notes_of_a_confined_local_site(monkeypatch: pytest.MonkeyPatch) -> None:
    caps = capabilities_of(local_site(monkeypatch))
    assert (caps.local_confined, caps.gpu_commands, caps.gpu_limits) == (True, False, None)
    assert_matches_golden(GOLDEN / "local_confined.md", render_notes(caps))


def test_notes_of_a_slurm_site_with_gpu_commands(tmp_path: Path) -> None:
    caps = capabilities_of(slurm_site(tmp_path))
    assert caps.gpu_commands and caps.gpu_limits is not None
    limits = caps.gpu_limits
    assert (limits.max_gpus, limits.max_time_minutes, limits.max_concurrent_jobs) == (8, 120, 4)
    assert limits.read_only_paths == ("/opt/venvs/torch", "/opt/datasets/imagenet")
    assert caps.profilers == ("nsys", "py-spy")
    # Evaluations go where sbatch_arguments send them, with the time limit they give.
    assert [(p.name, p.time_limit_minutes) for p in caps.partitions] == [
        ("eval", 120),
        ("eval-long", 120),
    ]
    # sinfo alone knows the GPU partitions' limits: none is made up.
    assert [(p.name, p.time_limit_minutes) for p in limits.partitions] == [
        ("main", None),
        ("priority", None),
    ]
    notes = render_notes(caps)
    assert "`/opt/venvs/torch`" in notes and "`/opt/datasets/imagenet`" in notes
    assert_matches_golden(GOLDEN / "slurm_agent_gpu.md", notes)


def test_notes_of_a_skypilot_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    caps = capabilities_of(sky_site(tmp_path, monkeypatch))
    assert (caps.backend, caps.accelerator_type, caps.allocation_time) == (
        "skypilot",
        "MI300A",
        "08:00:00",
    )
    assert [p.name for p in caps.partitions] == ["mi300"] and caps.local_confined is None
    assert_matches_golden(GOLDEN / "skypilot.md", render_notes(caps))


def test_a_slurm_site_without_agent_gpu_offers_no_gpu_commands(tmp_path: Path) -> None:
    config = tmp_path / "slurm.toml"
    config.write_text(SLURM_SITE.split("[vibesys.agent_gpu]")[0].replace("--time=2:00:00", "-t5"))
    site = resolve_site(
        run_id="c", workspace=WORKSPACE, resources=PortableResources(), slurm_config=config
    )
    caps = capabilities_of(site)
    assert (caps.gpu_commands, caps.gpu_limits) == (False, None)
    assert {p.time_limit_minutes for p in caps.partitions} == {5}
    assert "None in this session (no `vibesys-gpu`)" in render_notes(caps)


def test_the_reply_keeps_every_old_key_and_parses_back(tmp_path: Path) -> None:
    caps = capabilities_of(slurm_site(tmp_path))
    dumped = caps.model_dump(mode="json")
    assert set(dumped) >= OLD_KEYS
    assert (dumped["gpu_commands"], dumped["remote_profiling"], dumped["profilers"]) == (
        True,
        True,
        ["nsys", "py-spy"],
    )
    assert dumped["kinds"] == ["accuracy", "benchmark", "profile"]
    assert dumped["results_dir"] == str(RESULTS) and dumped["env"] == ["DATA_VERSION", "SEED"]
    assert SessionCapabilities.model_validate_json(json.dumps(dumped)) == caps


def test_the_schema_in_docs_is_the_models() -> None:
    assert json.loads(SCHEMA.read_text(encoding="utf-8")) == (
        SessionCapabilities.model_json_schema()
    ), "docs/capabilities.schema.json is stale: python docs/gen_docs.py"


def test_the_helper_prints_the_notes_as_the_bridge_sent_them(bridge: Bridge) -> None:
    env = os.environ | {
        "VIBESYS_EVAL_SOCKET": str(bridge.socket_path),
        "VIBESYS_EVAL_TOKEN": bridge.token,
    }

    def helper(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, client.__file__, *args]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)

    # A bridge that renders none: the helper says so rather than print nothing.
    silent = helper("capabilities", "--notes")
    assert (silent.returncode, silent.stdout) == (2, "")
    assert "this bridge renders no notes" in silent.stderr
    bridge.server.notes = "# Runtime notes\n\n- here\n"
    said = helper("capabilities", "--notes")
    assert (said.returncode, said.stdout) == (0, "# Runtime notes\n\n- here\n"), said.stderr
    assert json.loads(helper("capabilities").stdout) == {"backend": "local"}
