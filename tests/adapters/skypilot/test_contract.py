"""Contract tests against the real pinned SkyPilot (its own venv; no server, no cluster): the
version check, and every kind of task the adapter generates goes through SkyPilot's own task
parser and means what vibesys meant."""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from vibesys.adapters.skypilot.boundary import SkyCli
from vibesys.adapters.skypilot.ops import SkyOps
from vibesys.adapters.skypilot.task import exec_task, launch_task, render_task
from vibesys.adapters.staging import copy_command

from .test_task_wrapper import effective

pytestmark = pytest.mark.skypilot

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def ops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SkyOps]:
    venv = Path(os.environ.get("VIBESYS_SKY_VENV") or ROOT / ".sky-venv")
    subprocess.run(
        [str(ROOT / "scripts" / "skypilot-env"), "create", str(venv)],
        check=True,
        timeout=900,
        capture_output=True,
    )
    # Importing sky writes ~/.sky: a throwaway HOME keeps the account's home as it was.
    home = tmp_path_factory.mktemp("skyhome")
    yield SkyOps(SkyCli(venv=venv, env={"HOME": str(home)}))


def test_the_pinned_version_is_accepted(ops: SkyOps) -> None:
    assert ops.cli.check_version() == "0.14.1"


SHAPES: dict[str, dict[str, Any]] = {
    "gpu-exclusive-multinode": {},
    "cpu-only": {
        "accelerators_per_node": None,
        "accelerator_type": None,
        "accelerator_backend": None,
        "exclusive": False,
        "infra": "slurm/site-b",
        "cpus_per_node": None,
        "command_prefix": [],
    },
    "long-wall-time": {"allocation_time": "2-12:00:00", "infra": "slurm"},
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_generated_task_is_accepted_by_skypilots_parser(
    ops: SkyOps, shape: str, tmp_path: Path
) -> None:
    chosen = effective(**SHAPES[shape])
    launch = tmp_path / "launch.json"
    launch.write_text(render_task(launch_task(chosen, "vibesys-c-1234abcd")))
    parsed = ops.helper("validate", str(launch))
    (resources,) = parsed["resources"]
    assert parsed["num_nodes"] == chosen.nodes and not parsed["has_run"]
    assert resources["cloud"] == "Slurm"
    infra = chosen.infra.split("/")
    assert resources["region"] == (infra[1] if len(infra) > 1 else None)
    assert resources["zone"] == (infra[2] if len(infra) > 2 else None)
    wanted = (
        {chosen.accelerator_type: chosen.accelerators_per_node}
        if chosen.accelerators_per_node
        else None
    )
    assert resources["accelerators"] == wanted
    sbatch = resources["config"]["slurm"]["sbatch_options"]
    assert sbatch["time"] == chosen.allocation_time
    assert sbatch.get("exclusive", False) is chosen.exclusive

    setup = shlex.join(copy_command("/scratch/u/vibesys/snapshots/" + "a" * 64, "/scratch/w"))
    run = tmp_path / "exec.json"
    task = exec_task(
        chosen,
        job_name="vibesys-inv-1",
        cluster="vibesys-c-1234abcd",
        remote_attempt_dir=PurePosixPath("/scratch/u/vibesys/inv/1"),
        command=["python", "-c", "print('it''s \"quoted\" $HOME\\n')", "ünïcode"],
        setup=setup,
        envs={"SEED": "1"},
    )
    run.write_text(render_task(task))
    parsed = ops.helper("validate", str(run))
    assert parsed["has_run"] and parsed["num_nodes"] == 1 and parsed["name"] == "vibesys-inv-1"
    assert parsed["workdir"] is None  # nothing synced: the candidate is a staged snapshot
    assert parsed["envs"] == ["SEED", "VIBESYS_SKY_CLUSTER"]
    assert parsed["run"] == task["run"]  # every quote and byte survives SkyPilot's reading


def test_a_task_skypilot_rejects_is_reported_as_its_error(ops: SkyOps, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x", "resources": {"infra": "slurm", "no_such_key": 1}}\n')
    with pytest.raises(Exception, match="sdk helper validate"):
        ops.helper("validate", str(bad))
