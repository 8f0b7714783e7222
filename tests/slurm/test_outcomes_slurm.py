"""Every way a job can end, on the real cluster, through `vibesys run` with both adapters:
the exit status, the recorded outcome, and what Slurm's own accounting says."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.slurm import (
    cli,
    finished_evidence,
    history_text,
    job_output,
    only_invocation,
    run_args,
    sacct_states,
    show,
    slurm,
    wait_for_state,
)

pytestmark = pytest.mark.slurm

ADAPTERS = ["sbatch", "srun"]


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_exit_0_completes(tmp_path: Path, slurm_toml: Path, adapter: str) -> None:
    result = cli(*run_args(adapter, slurm_toml), "sh", "-c", "echo out; exit 0", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "out\n" in result.stdout
    inv = only_invocation(tmp_path)
    assert (inv["state"], inv["outcome"], inv["exit_code"]) == ("DONE", "COMPLETED", 0)
    assert [a["failure_class"] for a in inv["attempts"]] == ["COMPLETED"]
    assert job_output(inv) == "out\n"
    # Where it ran, as the scheduler said: the site's name, partition, node, start and end.
    ran = inv["attempts"][0]["provenance"]
    assert (ran["site"], ran["slurm_job_id"]) == ("local", inv["attempts"][0]["job_id"])
    assert ran["partition"] in ("main", "priority") and ran["nodes"] == "node1"
    assert ran["start"] <= ran["end"] and ran["cpus"] == "1"


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_exit_3_is_an_application_failure_never_retried(
    tmp_path: Path, slurm_toml: Path, adapter: str
) -> None:
    result = cli(*run_args(adapter, slurm_toml), "sh", "-c", "echo out; exit 3", cwd=tmp_path)
    assert result.returncode == 3, result.stderr
    inv = only_invocation(tmp_path)
    assert (inv["state"], inv["outcome"], inv["exit_code"]) == ("DONE", "APPLICATION_FAILED", 3)
    assert len(inv["attempts"]) == 1 and inv["retries"] == 0
    if adapter == "srun":  # seen to end when srun returned, not at a status round
        assert "srun exited 3; marker exit_code=3" in finished_evidence(inv)
    # Slurm's accounting agrees: exactly one job under the attempt's name, and it failed.
    assert sacct_states(inv["attempts"][0]["job_name"]) == ["FAILED"]


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_sigkill_exits_137(tmp_path: Path, slurm_toml: Path, adapter: str) -> None:
    result = cli(*run_args(adapter, slurm_toml), "sh", "-c", "kill -9 $$", cwd=tmp_path)
    assert result.returncode == 137, result.stderr
    inv = only_invocation(tmp_path)
    assert (inv["state"], inv["outcome"], inv["exit_code"]) == ("DONE", "APPLICATION_FAILED", 137)
    assert len(inv["attempts"]) == 1


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_external_scancel_is_cancelled(tmp_path: Path, slurm_toml: Path, adapter: str) -> None:
    detached = cli(*run_args(adapter, slurm_toml, "--detach"), "sleep", "60", cwd=tmp_path)
    assert detached.returncode == 0, detached.stderr
    invocation = detached.stdout.strip()
    running = show(tmp_path, invocation)
    assert running["state"] == "RUNNING"
    job_name, job_id = running["attempts"][0]["job_name"], running["attempts"][0]["job_id"]
    assert wait_for_state(job_name, ["RUNNING"]) == job_id

    slurm("scancel", job_id)  # someone else's cancel, not vibesys's
    waited = cli("wait", invocation, cwd=tmp_path)
    assert waited.returncode == 130, waited.stderr
    inv = show(tmp_path, invocation)
    assert (inv["state"], inv["outcome"]) == ("DONE", "CANCELLED")
    assert len(inv["attempts"]) == 1, "a cancelled job is not retried"
    evidence = finished_evidence(inv)
    assert "CANCELLED" in evidence and f"job {job_id}" in evidence, evidence
    assert "cancelled by vibesys" not in evidence, "vibesys did not ask for this cancel"
    assert sacct_states(job_name) == ["CANCELLED"]


@pytest.mark.beside_live
def test_own_time_limit_is_an_application_failure(tmp_path: Path, slurm_toml: Path) -> None:
    """TIMEOUT of the job's own `--time 1`: the command's fault, never retried. Slurm enforces
    whole minutes and checks every ~30 s, so this takes 60-90 s of waiting, which
    scripts/test spends beside the live SkyPilot test."""
    result = cli(
        *run_args("sbatch", slurm_toml, "--time", "1", "--retry-delay", "1"),
        "sleep",
        "300",
        cwd=tmp_path,
        timeout=240,
    )
    inv = only_invocation(tmp_path)
    assert (inv["state"], inv["outcome"]) == ("DONE", "APPLICATION_FAILED"), history_text(inv)
    assert result.returncode == 1, result.stderr  # no exit code of its own: the command failed
    assert len(inv["attempts"]) == 1 and inv["retries"] == 0
    assert "TIMEOUT" in finished_evidence(inv)
    assert sacct_states(inv["attempts"][0]["job_name"]) == ["TIMEOUT"]
