"""Admission: token, working directory (symlinks resolved), limits and the environment filter,
against real directories and symlinks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vibesys.broker.admission import OUTSIDE_WORKSPACE, Admission, Refusal
from vibesys.broker.environment import job_environment
from vibesys.broker.protocol import BrokerCall
from vibesys.config.slurm import AgentGpuConfig

LIMITS = AgentGpuConfig(
    partitions=("main", "priority"),
    max_gpus=2,
    max_time_minutes=60,
    default_time_minutes=5,
    job_name_prefix="vibesys-gpu",
)
HOST = {"PATH": "/usr/bin:/bin", "HOME": "/home/op", "USER": "op", "LANG": "C.UTF-8", "SECRET": "x"}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Two candidates' worktrees side by side, and a directory of the host's."""
    for name in ("a/sub", "b", "host"):
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / "a" / "escape").symlink_to(tmp_path / "host")
    (tmp_path / "a" / "to-b").symlink_to(tmp_path / "b")
    (tmp_path / "a" / "inner").symlink_to("sub")
    (tmp_path / "a" / "file").write_text("x")
    (tmp_path / "link-to-a").symlink_to(tmp_path / "a")
    return tmp_path


def admission(workspace: Path) -> Admission:
    return Admission("tok", os.path.realpath(workspace), LIMITS, HOST)


def call(cwd: Path | str, **changes: object) -> BrokerCall:
    fields: dict[str, object] = {
        "token": "tok",
        "cwd": str(cwd),
        "argv": ("nvidia-smi",),
        "gpus": 1,
        "time_minutes": None,
        "env": {},
    }
    fields.update(changes)
    return BrokerCall(**fields)  # type: ignore[arg-type]


def test_an_accepted_request(tree: Path) -> None:
    job = admission(tree / "a").admit(call(tree / "a" / "sub", time_minutes=30))
    assert job.cwd == str(tree / "a" / "sub")
    assert job.sandbox.workspace == str(tree / "a")
    assert (job.gpus, job.time_minutes, job.partitions) == (1, 30, ("main", "priority"))
    assert job.job_name_prefix == "vibesys-gpu"
    assert job.argv == ("nvidia-smi",)


def test_the_default_time_applies_when_none_is_asked(tree: Path) -> None:
    assert admission(tree / "a").admit(call(tree / "a")).time_minutes == 5


def test_a_timeout_sizes_the_job_in_whole_minutes_and_is_kept_exact(tree: Path) -> None:
    job = admission(tree / "a").admit(call(tree / "a", timeout_seconds=75))
    assert (job.time_minutes, job.timeout_seconds) == (2, 75)  # Slurm's limit: the backstop
    job = admission(tree / "a").admit(call(tree / "a", timeout_seconds=60, time_minutes=3))
    assert (job.time_minutes, job.timeout_seconds) == (3, 60)
    with pytest.raises(Refusal, match="--timeout-seconds 181 is past the job's --time 3"):
        admission(tree / "a").admit(call(tree / "a", timeout_seconds=181, time_minutes=3))
    with pytest.raises(Refusal, match="--time 61 exceeds"):  # the agent's limit still holds
        admission(tree / "a").admit(call(tree / "a", timeout_seconds=3601))


@pytest.mark.parametrize(
    "cwd",
    [
        "host",  # outside
        "b",  # another candidate's worktree
        "a/escape",  # a symlink inside the workspace leading out
        "a/to-b",  # ... into another candidate's worktree
        "a/../host",  # `..` out of it
        "a/sub/../../b",
        "nowhere/at/all",  # outside and missing: no hint that it does not exist
    ],
)
def test_directories_outside_the_workspace_are_refused(tree: Path, cwd: str) -> None:
    with pytest.raises(Refusal, match=f"^{OUTSIDE_WORKSPACE}$"):
        admission(tree / "a").admit(call(f"{tree}/{cwd}"))


@pytest.mark.parametrize("cwd", ["a/inner", "link-to-a/sub", "a/sub/.."])
def test_symlinks_and_dots_that_stay_inside_are_resolved(tree: Path, cwd: str) -> None:
    job = admission(tree / "a").admit(call(f"{tree}/{cwd}"))
    assert job.cwd == os.path.realpath(f"{tree}/{cwd}")
    assert not Path(job.cwd).is_symlink()


def test_a_workspace_given_through_a_symlink_is_the_same_workspace(tree: Path) -> None:
    job = admission(tree / "link-to-a").admit(call(tree / "link-to-a" / "sub"))
    assert job.cwd == str(tree / "a" / "sub")


def test_missing_or_non_directories_inside_are_named(tree: Path) -> None:
    with pytest.raises(Refusal, match="does not exist"):
        admission(tree / "a").admit(call(tree / "a" / "missing"))
    with pytest.raises(Refusal, match="is not a directory"):
        admission(tree / "a").admit(call(tree / "a" / "file"))


def test_a_bad_token_is_refused_before_anything_else(tree: Path) -> None:
    with pytest.raises(Refusal, match="bad token") as caught:
        admission(tree / "a").admit(call(tree / "host", token="toc", gpus=99))
    assert "tok" not in str(caught.value).replace("token", "")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"gpus": 3}, r"--gpus 3 exceeds vibesys.agent_gpu.max_gpus \(2\)"),
        ({"time_minutes": 61}, r"--time 61 exceeds vibesys.agent_gpu.max_time_minutes \(60\)"),
    ],
)
def test_limits_are_rejected_never_clamped(
    tree: Path, changes: dict[str, object], message: str
) -> None:
    with pytest.raises(Refusal, match=message):
        admission(tree / "a").admit(call(tree / "a", **changes))


def test_the_job_environment_is_filtered(tree: Path) -> None:
    agent = {
        "MY_FLAG": "1",
        "PYTHONPATH": "/w/src",
        "LANG": "en_US.UTF-8",
        "PATH": "/opt/conda/bin",
        "HOME": "/home/agent",
        "HOSTNAME": "container",
        "CUDA_VISIBLE_DEVICES": "",
        "NVIDIA_VISIBLE_DEVICES": "all",
        "SLURM_JOB_ID": "7",
        "SLURM_CONF": "/etc/evil.conf",
        "SBATCH_ACCOUNT": "other",
        "VIBESYS_GPU_TOKEN": "tok",
        "VIBESYS_GPU_SOCKET": "/run/gpu.sock",
    }
    env = admission(tree / "a").admit(call(tree / "a", env=agent)).env
    assert dict(env) == {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/op",
        "USER": "op",
        "LANG": "en_US.UTF-8",
        "MY_FLAG": "1",
        "PYTHONPATH": "/w/src",
    }


def test_the_host_baseline_is_an_allowlist() -> None:
    assert job_environment({"SECRET": "x", "PATH": "/bin", "LC_ALL": "C"}, {}) == {
        "PATH": "/bin",
        "LC_ALL": "C",
    }
