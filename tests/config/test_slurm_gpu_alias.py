"""The deprecated `[slurm_gpu]` table, translated by a pure function: a table of old tables and
the settings (or the error) each one becomes."""

from __future__ import annotations

from typing import Any

import pytest

from vibesys.config.slurm_gpu_alias import DEPRECATION_WARNING, GateSizing, translate_slurm_gpu
from vibesys.errors import ConfigError

HOME = "/home/op"
BASE: dict[str, Any] = {
    "partitions": ["main", "priority"],
    "max_gpus": 4,
    "max_time_minutes": 120,
    "default_time_minutes": 30,
    "gate_time_minutes": 45,
}


def old(**changes: Any) -> dict[str, Any]:
    return {**BASE, **changes}


def test_the_minimal_table() -> None:
    result = translate_slurm_gpu(old(), home=HOME)
    slurm, agent = result.site.slurm, result.site.agent_gpu
    assert agent is not None
    assert slurm.transport.kind == "local"
    assert slurm.transport.shell_command == ("bash", "-c")
    assert slurm.remote_workspace_root == "/home/op/.cache/vibesys/slurm-gpu-stage"
    assert slurm.sbatch_arguments == ()  # srun_arguments never reach the gates
    assert (agent.partitions, agent.max_gpus, agent.max_time_minutes) == (
        ("main", "priority"),
        4,
        120,
    )
    assert agent.default_time_minutes == 30
    assert agent.job_name_prefix == "vibesys-gpu"
    assert result.gate == GateSizing(
        gpus=None,
        time_minutes=45,
        partitions=("main", "priority"),
        max_gpus=4,
    )
    assert result.warning == DEPRECATION_WARNING


CARRIED = [
    ("windows_command", ["slurm-windows", "--json"], ("slurm-windows", "--json")),
    ("job_name_prefix", "lab-gpu", "lab-gpu"),
    ("srun_arguments", ["--account=lab"], ("--account=lab",)),
    ("read_only_paths", ["/opt/venvs/torch"], ("/opt/venvs/torch",)),
    ("max_concurrent_jobs", 2, 2),
]


@pytest.mark.parametrize(("key", "value", "expected"), CARRIED, ids=[c[0] for c in CARRIED])
def test_keys_that_carry_over(key: str, value: Any, expected: Any) -> None:
    agent = translate_slurm_gpu(old(**{key: value}), home=HOME).site.agent_gpu
    assert getattr(agent, key) == expected


@pytest.mark.parametrize(
    ("srun", "scancel", "shell"),
    [
        (["srun"], ["scancel"], ("bash", "-c")),
        (["/usr/bin/srun"], ["scancel"], ("bash", "-c")),
        (
            ["login-container", "--", "srun"],
            ["login-container", "--", "scancel"],
            ("login-container", "--", "bash", "-c"),
        ),
    ],
)
def test_srun_and_scancel_become_one_shell_command(
    srun: list[str], scancel: list[str], shell: tuple[str, ...]
) -> None:
    site = translate_slurm_gpu(old(srun_command=srun, scancel_command=scancel), home=HOME).site
    assert site.slurm.transport.shell_command == shell


def test_gate_gpus_size_the_trusted_evaluation() -> None:
    assert translate_slurm_gpu(old(gate_gpus=2), home=HOME).gate.gpus == 2


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"gpu_type": "a100"}, "slurm_gpu.gpu_type: unknown key, cannot be carried over"),
        ({"gate_command": ["x"]}, "slurm_gpu.gate_command: unknown key"),
        (
            {"srun_command": ["wrap", "srun"]},
            "srun_command and scancel_command must carry the same wrapper",
        ),
        (
            {"srun_command": ["a", "srun"], "scancel_command": ["b", "scancel"]},
            "must carry the same wrapper (before srun: ['a'], before scancel: ['b'])",
        ),
        (
            {"srun_command": ["srun", "--pty"]},
            "slurm_gpu.srun_command: ['srun', '--pty'] must end in srun",
        ),
        ({"scancel_command": []}, "slurm_gpu.scancel_command"),
        ({"gate_gpus": 5}, "slurm_gpu.gate_gpus: 5 exceeds max_gpus (4)"),
        ({"max_gpus": "4"}, "slurm_gpu.max_gpus: Input should be a valid integer"),
        (
            {"default_time_minutes": 200},
            "slurm_gpu.default_time_minutes: 200 exceeds max_time_minutes",
        ),
        (
            {"read_only_paths": ["/opt/x/"]},
            "slurm_gpu.read_only_paths: '/opt/x/' is not normalized",
        ),
        (
            {"srun_arguments": ["--time=5"]},
            "slurm_gpu.srun_arguments: '--time=5': vibesys sets --time",
        ),
        ({"gate_time_minutes": 0}, "slurm_gpu.gate_time_minutes"),
    ],
)
def test_what_cannot_be_carried_over_is_rejected_by_name(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        translate_slurm_gpu(old(**changes), home=HOME)
    assert message in str(caught.value)


def test_a_missing_required_key_is_named() -> None:
    table = old()
    del table["gate_time_minutes"]
    with pytest.raises(ConfigError, match=r"slurm_gpu\.gate_time_minutes: Field required"):
        translate_slurm_gpu(table, home=HOME)


def test_translation_is_pure() -> None:
    table = old(srun_arguments=["--account=lab"])
    snapshot = {k: (list(v) if isinstance(v, list) else v) for k, v in table.items()}
    assert translate_slurm_gpu(table, home=HOME) == translate_slurm_gpu(table, home=HOME)
    assert table == snapshot
