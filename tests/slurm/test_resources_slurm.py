"""Resource requests on the real cluster: fake GPUs reach the job, requests nothing fits are
rejected (by vibesys before anything is written, or by Slurm itself), and the srun adapter's
partition choice follows the time limits and the windows command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.slurm import (
    cli,
    finished_evidence,
    job_output,
    only_invocation,
    run_args,
    sacct_rows,
    squeue_jobs,
    write_slurm_toml,
)

pytestmark = pytest.mark.slurm

ADAPTERS = ["sbatch", "srun"]
SHOW_ENV = 'echo "gpus=$CUDA_VISIBLE_DEVICES partition=$SLURM_JOB_PARTITION"'


# -- fake GPUs -------------------------------------------------------------------------------


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_gpus_reach_the_job(tmp_path: Path, slurm_toml: Path, adapter: str) -> None:
    result = cli(*run_args(adapter, slurm_toml, "--gpus", "2"), "sh", "-c", SHOW_ENV, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "gpus=0,1 " in result.stdout
    inv = only_invocation(tmp_path)
    assert "gpus=0,1 " in job_output(inv)


# -- rejections ------------------------------------------------------------------------------


def test_an_agent_partition_outside_the_limits_is_refused_before_anything_is_written(
    tmp_path: Path, slurm_toml: Path
) -> None:
    result = cli(*run_args("srun", slurm_toml, "--partition", "nosuch"), "true", cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "nosuch" in lines[0] and "vibesys.agent_gpu.partitions" in lines[0], lines[0]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / ".vibesys").exists(), "nothing may be written for a refused request"
    assert not (tmp_path / "remote").exists()


# -- trusted evaluations: sized by the task and [slurm], never by [vibesys.agent_gpu] --------


def test_a_trusted_evaluation_may_ask_more_than_the_agents_limits(tmp_path: Path) -> None:
    """The agents of this site get at most 1 GPU and 10 minutes in `main`; a trusted sbatch
    evaluation asking 2 GPUs, 20 minutes, in `priority` is accepted and runs with them. The
    agent's own srun asking the same is refused, naming the limit."""
    config = write_slurm_toml(
        tmp_path / "slurm.toml",
        tmp_path / "remote",
        partitions=["main"],
        max_gpus=1,
        max_time_minutes=10,
    )
    asked = ("--gpus", "2", "--time", "20", "--partition", "priority")
    trusted = cli(*run_args("sbatch", config, *asked), "sh", "-c", SHOW_ENV, cwd=tmp_path)
    assert trusted.returncode == 0, trusted.stderr
    assert "gpus=0,1 partition=priority" in trusted.stdout
    ran = only_invocation(tmp_path)["attempts"][0]["provenance"]
    assert ran["partition"] == "priority" and "gpu" in (ran.get("tres") or ran.get("gres", ""))
    agent = cli(*run_args("srun", config, "--gpus", "2"), "true", cwd=tmp_path)
    assert agent.returncode == 2
    assert "--gpus 2 exceeds vibesys.agent_gpu.max_gpus (1)" in agent.stderr


def test_a_partition_slurm_does_not_know_is_rejected_by_slurm(
    tmp_path: Path, slurm_toml: Path
) -> None:
    """A trusted evaluation's partition is not checked against the agents' list: Slurm's
    answer decides, and the invocation ends REJECTED with it (exit 2)."""
    result = cli(*run_args("sbatch", slurm_toml, "--partition", "nosuch"), "true", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    inv = only_invocation(tmp_path)
    assert (inv["state"], inv["outcome"]) == ("DONE", "REJECTED")
    assert "invalid partition specified: nosuch" in finished_evidence(inv)


def test_srun_request_no_partition_fits_is_rejected(tmp_path: Path) -> None:
    """60 minutes is within agent_gpu.max_time_minutes, but main (the only configured
    partition) allows 30 minutes per sinfo: rejected before submission, naming the limit."""
    config = write_slurm_toml(tmp_path / "slurm.toml", tmp_path / "remote", partitions=["main"])
    result = cli(*run_args("srun", config, "--time", "60"), "true", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    inv = only_invocation(tmp_path)
    assert (inv["state"], inv["outcome"]) == ("DONE", "REJECTED")
    evidence = finished_evidence(inv)
    assert "no partition fits --time 60" in evidence and "main 30 min" in evidence, evidence
    assert inv["attempts"][0]["job_id"] is None, "nothing may have been submitted"


def test_a_time_beyond_the_partitions_maxtime_is_refused_before_anything_is_submitted(
    tmp_path: Path, slurm_toml: Path
) -> None:
    """main's MaxTime is 30 min (sinfo): --time 45 is refused by vibesys itself, in one line
    naming the limit, before sbatch runs (exit 2; Slurm would have refused it too here, and
    would have queued it for ever on a site with EnforcePartLimits=NO). No job exists."""
    result = cli(
        *run_args("sbatch", slurm_toml, "--time", "45", "--partition", "main"),
        "true",
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.endswith(
        "DONE REJECTED attempt 1: --time 45 exceeds partition main's MaxTime (30 min): "
        "nothing submitted"
    ), line
    inv = only_invocation(tmp_path)
    assert (inv["state"], inv["outcome"]) == ("DONE", "REJECTED")
    [attempt] = inv["attempts"]
    assert attempt["job_id"] is None and attempt["submitted_at"] is None
    assert not (tmp_path / "remote").exists(), "nothing written on the cluster's side"
    name = attempt["job_name"]
    assert squeue_jobs(name) == {} and sacct_rows(name) == [], "no job may exist"


# -- partition choice (srun) -----------------------------------------------------------------


def _partition_of_srun_job(tmp_path: Path, config: Path, *options: str) -> str:
    result = cli(*run_args("srun", config, *options), "sh", "-c", SHOW_ENV, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    partition = result.stdout.split("partition=")[1].split()[0]
    assert f"partition={partition}" in job_output(only_invocation(tmp_path))
    return partition


def test_srun_uses_the_first_preferred_partition_that_fits(
    tmp_path: Path, slurm_toml: Path
) -> None:
    assert _partition_of_srun_job(tmp_path, slurm_toml) == "main"


def test_srun_skips_a_partition_whose_time_limit_is_too_short(
    tmp_path: Path, slurm_toml: Path
) -> None:
    # main allows 30 minutes, priority 120: a 60-minute request can only go to priority.
    assert _partition_of_srun_job(tmp_path, slurm_toml, "--time", "60") == "priority"


def test_windows_command_picks_the_partition_open_now(tmp_path: Path) -> None:
    windows = ["sh", "-c", "echo '" + json.dumps({"main": False, "priority": True}) + "'"]
    config = write_slurm_toml(tmp_path / "slurm.toml", tmp_path / "remote", windows_command=windows)
    assert _partition_of_srun_job(tmp_path, config) == "priority"


@pytest.mark.parametrize(
    "windows",
    [["sh", "-c", "echo broken >&2; exit 1"], ["sh", "-c", "echo not json"]],
    ids=["fails", "unreadable"],
)
def test_failing_windows_command_falls_back_to_the_first_fitting_partition(
    tmp_path: Path, windows: list[str]
) -> None:
    config = write_slurm_toml(
        tmp_path / "slurm.toml",
        tmp_path / "remote",
        partitions=["priority", "main"],
        windows_command=windows,
    )
    assert _partition_of_srun_job(tmp_path, config) == "priority"
    # And with main preferred, main.
    other = tmp_path / "other"
    other.mkdir()
    config = write_slurm_toml(other / "slurm.toml", other / "remote", windows_command=windows)
    assert _partition_of_srun_job(other, config) == "main"
