"""Phases chained by the scheduler: `--after` submits a child with `afterok` and
`--kill-on-invalid-dep=yes`, so a failed parent cancels it instead of parking it forever."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.slurm.helpers import cli, run_args, show, slurm

pytestmark = pytest.mark.slurm


def test_child_runs_after_a_successful_parent(tmp_path: Path, slurm_toml: Path) -> None:
    marker = tmp_path / "parent-done"
    parent = cli(
        *run_args("sbatch", slurm_toml, "--detach"),
        "sh",
        "-c",
        f"sleep 2; touch {marker}",
        cwd=tmp_path,
    )
    assert parent.returncode == 0, parent.stderr
    parent_id = parent.stdout.strip()
    child = cli(
        *run_args("sbatch", slurm_toml, "--after", parent_id),
        "sh",
        "-c",
        f"test -e {marker} && echo parent finished first",
        cwd=tmp_path,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout == "parent finished first\n"
    assert cli("wait", parent_id, cwd=tmp_path).returncode == 0


def test_failed_parent_cancels_the_child(tmp_path: Path, slurm_toml: Path) -> None:
    parent = cli(
        *run_args("sbatch", slurm_toml, "--detach"), "sh", "-c", "sleep 1; exit 1", cwd=tmp_path
    )
    parent_id = parent.stdout.strip()
    child = cli(
        *run_args("sbatch", slurm_toml, "--after", parent_id, "--json"),
        "true",
        cwd=tmp_path,
        timeout=120,
    )
    assert child.returncode == 130, child.stderr
    shown = show(tmp_path, child.stdout.split('"id": "')[1].split('"')[0])
    assert shown["outcome"] == "CANCELLED"
    # A job cancelled while it waited on a dependency never became eligible: `sacct --name`
    # does not list it, `sacct -j` does.
    job_id = shown["attempts"][0]["job_id"]
    states = slurm("sacct", "-X", "-n", "-P", "-o", "State,Reason", "-j", job_id)
    assert states.startswith("CANCELLED"), states
    assert cli("wait", parent_id, cwd=tmp_path).returncode == 1


def test_after_needs_a_submitted_sbatch_invocation(tmp_path: Path, slurm_toml: Path) -> None:
    local = cli("run", "--", "true", cwd=tmp_path)
    assert local.returncode == 0
    inv = cli("journal", "list", "--json", cwd=tmp_path).stdout.split('"id": "')[1].split('"')[0]
    refused = cli(*run_args("sbatch", slurm_toml, "--after", inv), "true", cwd=tmp_path)
    assert refused.returncode == 2 and "not an sbatch invocation" in refused.stderr
    srun = cli(*run_args("srun", slurm_toml, "--after", inv), "true", cwd=tmp_path)
    assert srun.returncode == 2 and "--after is not an option of the srun adapter" in srun.stderr
