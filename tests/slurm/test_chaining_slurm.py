"""Phases chained by the scheduler: `--after` submits a child with `afterok` (and
`--kill-on-invalid-dep=no`, so a parent that fails is not the end of the child while the parent
may be retried); a parent that fails for good ends the child DEPENDENCY_FAILED (exit 66)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.slurm.helpers import cli, run_args, slurm

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


def test_a_parent_that_fails_for_good_ends_its_child_dependency_failed(
    tmp_path: Path, slurm_toml: Path
) -> None:
    """Issue: a child killed for a failed parent ended CANCELLED with exit 130, the same as an
    interrupt. Now the child's pending job waits on a dependency that can never be satisfied
    (Slurm leaves it pending), vibesys cancels it and says why."""
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
    assert cli("wait", parent_id, cwd=tmp_path).returncode == 1  # it drives the parent's end
    assert child.returncode == 66, child.stderr
    shown = json.loads(child.stdout)
    assert (shown["outcome"], shown["failure_class"]) == ("DEPENDENCY_FAILED", "DEPENDENCY_FAILED")
    assert shown["result"]["status"] == "DEPENDENCY_FAILED", "proven, never UNRESOLVED"
    result = cli("result", shown["id"], "--json", cwd=tmp_path)
    assert (result.returncode, json.loads(result.stdout)) == (0, shown["result"])
    assert f"{parent_id}, ended APPLICATION_FAILED" in child.stderr
    text = cli("journal", "show", shown["id"], cwd=tmp_path).stdout
    assert "DEPENDENCY_FAILED" in text and "so its command never ran" in text
    # A job cancelled while it waited on a dependency never became eligible: `sacct --name`
    # does not list it, `sacct -j` does.
    job_id = shown["attempts"][0]["job_id"]
    states = slurm("sacct", "-X", "-n", "-P", "-o", "State,Reason", "-j", job_id)
    assert states.startswith("CANCELLED"), states


def test_after_needs_a_submitted_sbatch_invocation(tmp_path: Path, slurm_toml: Path) -> None:
    local = cli("run", "--", "true", cwd=tmp_path)
    assert local.returncode == 0
    [listed] = json.loads(cli("journal", "list", "--json", cwd=tmp_path).stdout)["invocations"]
    inv = listed["id"]
    refused = cli(*run_args("sbatch", slurm_toml, "--after", inv), "true", cwd=tmp_path)
    assert refused.returncode == 2 and "not an sbatch invocation" in refused.stderr
    srun = cli(*run_args("srun", slurm_toml, "--after", inv), "true", cwd=tmp_path)
    assert srun.returncode == 2 and "--after is not an option of the srun adapter" in srun.stderr
