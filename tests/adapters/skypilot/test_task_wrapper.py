"""Task generation (pure, golden) and the attempt program, run for real with bash."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
from pathlib import Path, PurePosixPath

import pytest

from tests.helpers.golden_files import assert_matches_golden
from vibesys.adapters import staging
from vibesys.adapters.skypilot.naming import cluster_name, fingerprint, name_on_cloud
from vibesys.adapters.skypilot.parse import exit_code_line
from vibesys.adapters.skypilot.task import exec_task, launch_task, render_task, run_section
from vibesys.adapters.skypilot.wrapper import REFUSED_EXIT, SETUP_FAILED_EXIT, attempt_program
from vibesys.adapters.transports import LocalTransport
from vibesys.config.resources import (
    EffectiveResources,
    PortableResources,
    SkyPilotProfile,
    resolve_resources,
)
from vibesys.snapshot import build_manifest

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "sky"


def effective(**changes: object) -> EffectiveResources:
    values: dict[str, object] = {
        "runner": "skypilot",
        "infra": "slurm/site-a/gpu",
        "accelerator_backend": "rocm",
        "accelerator_type": "GPU-X",
        "accelerators_per_node": 4,
        "cpus_per_node": 32,
        "exclusive": True,
        "command_prefix": ["srun", "--overlap", "--environment=/env/x.toml"],
        "allocation_time": "08:00:00",
        "remote_artifact_root": "/scratch/$USER/vibesys",
    }
    values.update(changes)
    profile = SkyPilotProfile.model_validate(values)
    return resolve_resources(PortableResources(nodes=2), profile, "site-a")


def golden(name: str, text: str) -> None:
    assert_matches_golden(GOLDEN / name, text)


def test_launch_task_golden() -> None:
    golden("launch_task.json", render_task(launch_task(effective(), "vibesys-c-1234abcd")))


def test_exec_task_golden() -> None:
    task = exec_task(
        effective(),
        job_name="vibesys-inv-1",
        cluster="vibesys-c-1234abcd",
        remote_attempt_dir=PurePosixPath("/scratch/u/vibesys/inv/1"),
        command=["python", "eval.py", "--name", "it's $HOME; rm -rf /"],
        setup="sh -c copy /scratch/u/vibesys/snapshots/abc /scratch/u/vibesys/inv/1/work",
        envs={"SEED": "1"},
    )
    golden("exec_task.json", render_task(task))
    assert task["num_nodes"] == 1  # the wrapper claims once; the prefix spreads the work
    assert "workdir" not in task  # SkyPilot syncs nothing: the candidate is a staged snapshot


def test_cpu_only_request_asks_for_no_accelerators() -> None:
    cpu = effective(accelerators_per_node=None, accelerator_type=None, accelerator_backend=None)
    task = launch_task(cpu, "c")
    assert "accelerators" not in task["resources"] and task["num_nodes"] == 2


def test_run_section_quotes_every_word() -> None:
    text = run_section("echo $1", PurePosixPath("/d"), ["a b", "'"], ["pre"], "cp x y")
    assert text == "exec bash -c 'echo $1' vibesys-sky /d 'cp x y' pre 'a b' ''\"'\"''\n"
    with pytest.raises(ValueError):
        run_section("x", PurePosixPath("/d"), [])


def staged_setup(tmp: Path) -> tuple[str, Path]:
    """A candidate staged as a snapshot under tmp/root (as the backend stages it through the
    login node), and the setup line that copies and verifies it into D/work."""
    candidate = tmp / "candidate"
    candidate.mkdir(exist_ok=True)
    (candidate / "input.txt").write_text("in\n")
    (candidate / ".env").write_text("TOKEN=secret\n")
    manifest = build_manifest(candidate)
    result = staging.stage(manifest, candidate, LocalTransport(), tmp / "root")
    steps = (
        staging.copy_command(result.snapshot_dir, tmp / "D" / "work"),
        staging.verify_command(tmp / "D" / "work", manifest.digest),
    )
    return " && ".join(shlex.join(step) for step in steps), Path(result.snapshot_dir)


def run_attempt(
    tmp: Path, command: list[str], *, env: dict[str, str] | None = None, candidate: bool = True
) -> subprocess.CompletedProcess[str]:
    work = tmp / "sky_workdir"  # SkyPilot's own, which the attempt never reads
    work.mkdir(exist_ok=True)
    (work / "stale.txt").write_text("an earlier exec's\n")
    setup = staged_setup(tmp)[0] if candidate else ""
    script = run_section(attempt_program(), PurePosixPath(tmp / "D"), command, (), setup)
    environment = {
        **os.environ,
        "SKYPILOT_INTERNAL_JOB_ID": "7",
        "SLURM_JOB_ID": "107",
        **(env or {}),
    }
    return subprocess.run(
        ["bash", "-c", script],
        cwd=work,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_attempt_claims_runs_in_a_copy_and_records_its_true_exit_code(tmp_path: Path) -> None:
    done = run_attempt(tmp_path, ["sh", "-c", "cat input.txt; echo err >&2; touch made; exit 3"])
    d = tmp_path / "D"
    assert done.returncode == 3
    assert exit_code_line(done.stdout) == 3
    assert (d / "exit_code").read_text() == "3\n"
    assert (d / "stdout").read_text() == "in\n" and (d / "stderr").read_text() == "err\n"
    assert (d / "work" / "made").exists() and not (tmp_path / "sky_workdir" / "made").exists()
    # The verified snapshot (the marker aside), not SkyPilot's workdir, and no .env.
    assert sorted(p.name for p in (d / "work").iterdir()) == [
        ".vibesys-snapshot", "input.txt", "made",
    ]  # fmt: skip
    claim = (d / "claim").read_text().splitlines()
    assert claim[0] == "kind=job" and "sky_job_id=7" in claim and "slurm_job_id=107" in claim
    assert [p.name for p in d.iterdir() if p.name.startswith(".claim")] == []


def test_a_second_run_of_the_same_attempt_refuses(tmp_path: Path) -> None:
    assert run_attempt(tmp_path, ["true"]).returncode == 0
    again = run_attempt(tmp_path, ["sh", "-c", "touch second"])
    assert again.returncode == REFUSED_EXIT
    refused = (tmp_path / "D" / "refused").read_text()
    assert "kind=job" in refused and "sky_job_id=7" in refused
    assert not (tmp_path / "D" / "work" / "second").exists()


def test_a_fence_makes_the_attempt_refuse(tmp_path: Path) -> None:
    d = tmp_path / "D"
    d.mkdir()
    (d / "claim").write_text("kind=fence\nby=vibesys\n")
    done = run_attempt(tmp_path, ["sh", "-c", "touch ran"])
    assert done.returncode == REFUSED_EXIT and not (d / "work").exists()
    assert not (d / "exit_code").exists() and "kind=fence" in (d / "refused").read_text()


def test_death_by_signal_is_128_plus_n(tmp_path: Path) -> None:
    done = run_attempt(tmp_path, ["sh", "-c", "kill -KILL $$"])
    assert done.returncode == 128 + signal.SIGKILL
    assert (tmp_path / "D" / "exit_code").read_text() == "137\n"


def test_without_a_candidate_the_command_runs_in_an_empty_directory(tmp_path: Path) -> None:
    done = run_attempt(tmp_path, ["sh", "-c", "ls -A; pwd"], candidate=False)
    assert done.returncode == 0
    assert (tmp_path / "D" / "stdout").read_text() == f"{tmp_path / 'D' / 'work'}\n"


def test_a_snapshot_that_does_not_verify_where_it_runs_never_runs(tmp_path: Path) -> None:
    setup, snapshot = staged_setup(tmp_path)
    (snapshot / "input.txt").chmod(0o644)
    (snapshot / "input.txt").write_text("tampered\n")  # after staging, before the job
    script = run_section(
        attempt_program(), PurePosixPath(tmp_path / "D"), ["touch", "ran"], (), setup
    )
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    d = tmp_path / "D"
    assert done.returncode == SETUP_FAILED_EXIT
    assert (d / "setup_failed").read_text() == f"{SETUP_FAILED_EXIT}\n"
    assert not (d / "exit_code").exists() and not (d / "work" / "ran").exists()


def test_cluster_names_are_stable_and_shape_specific() -> None:
    a = effective()
    assert cluster_name("Campaign_7", a) == cluster_name("Campaign_7", effective())
    assert cluster_name("c", a) != cluster_name("c", effective(cpus_per_node=16))
    # Wall time, prefix, paths and the profile's name do not change the lease.
    assert fingerprint(a) == fingerprint(effective(allocation_time="01:00:00", command_prefix=[]))
    long = cluster_name("x" * 150, a)
    assert len(long) <= 60 and long != cluster_name("x" * 151, a)
    assert cluster_name("ok-run", a) == f"vibesys-ok-run-{fingerprint(a)}"
    assert name_on_cloud("vibesys-a.b_c", "0123abcd") == "vibesys-a-b-c-0123abcd"


def test_task_files_are_valid_json(tmp_path: Path) -> None:
    text = render_task(launch_task(effective(), "c"))
    assert json.loads(text)["config"]["slurm"]["sbatch_options"] == {
        "time": "08:00:00",
        "exclusive": True,
    }
