"""slurm.toml's refusals: each bad value, key or table is one line naming it (strict models),
several errors report the first and count the rest, and bad TOML says where."""

from __future__ import annotations

import pytest

from tests.helpers.slurm_toml import EXAMPLE, MINIMAL, error_of


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "max_gpus = 8",
            "max_gpus = 0",
            "vibesys.agent_gpu.max_gpus: Input should be greater than 0",
        ),
        (
            "max_gpus = 8",
            'max_gpus = "8"',
            "vibesys.agent_gpu.max_gpus: Input should be a valid integer",
        ),
        (
            "max_gpus = 8",
            "max_gpus = true",
            "vibesys.agent_gpu.max_gpus: Input should be a valid integer",
        ),
        (
            "max_gpus = 8",
            "max_gpus = 1.5",
            "vibesys.agent_gpu.max_gpus: Input should be a valid integer",
        ),
        (
            "max_time_minutes = 120",
            "max_time_minutes = -1",
            "vibesys.agent_gpu.max_time_minutes: Input should be greater than 0",
        ),
        (
            "default_time_minutes = 30",
            "default_time_minutes = 121",
            "vibesys.agent_gpu.default_time_minutes: 121 exceeds max_time_minutes (120)",
        ),
        (
            "max_concurrent_jobs = 2",
            "max_concurrent_jobs = 0",
            "vibesys.agent_gpu.max_concurrent_jobs: Input should be greater than 0",
        ),
        (
            'partitions = ["main", "priority"]',
            "partitions = []",
            "vibesys.agent_gpu.partitions: Tuple should have at least 1 item after validation, "
            "not 0",
        ),
        (
            'partitions = ["main", "priority"]',
            'partitions = ["main", "main"]',
            "vibesys.agent_gpu.partitions: lists a partition twice",
        ),
        (
            'partitions = ["main", "priority"]',
            'partitions = ["main", 3]',
            "vibesys.agent_gpu.partitions[1]: Input should be a valid string",
        ),
        (
            'read_only_paths = ["/opt/venvs/torch"]',
            'read_only_paths = ["/opt/venvs/../torch"]',
            "vibesys.agent_gpu.read_only_paths: '/opt/venvs/../torch' is not normalized "
            "(no '.', '..', repeated or trailing '/')",
        ),
        (
            'read_only_paths = ["/opt/venvs/torch"]',
            'read_only_paths = ["/opt/venvs/torch/"]',
            "vibesys.agent_gpu.read_only_paths: '/opt/venvs/torch/' is not normalized "
            "(no '.', '..', repeated or trailing '/')",
        ),
        (
            'read_only_paths = ["/opt/venvs/torch"]',
            'read_only_paths = ["/"]',
            "vibesys.agent_gpu.read_only_paths: '/' must be an absolute path other than /",
        ),
        (
            'read_only_paths = ["/opt/venvs/torch"]',
            'read_only_paths = ["venvs/torch"]',
            "vibesys.agent_gpu.read_only_paths: 'venvs/torch' must be an absolute path other "
            "than /",
        ),
        (
            "srun_arguments = []",
            'srun_arguments = ["--time=5"]',
            "vibesys.agent_gpu.srun_arguments: '--time=5': vibesys sets --time for every srun job "
            "itself",
        ),
        (
            "srun_arguments = []",
            'srun_arguments = ["--account", "lab"]',
            "vibesys.agent_gpu.srun_arguments: 'lab' is not an option; write each one as a single "
            "item such as '--account=lab'",
        ),
        (
            'windows_command = ["slurm-windows", "--json"]',
            "windows_command = []",
            "vibesys.agent_gpu.windows_command: Tuple should have at least 1 item after "
            "validation, not 0",
        ),
        (
            "max_gpus = 8",
            "max_gpus = 8\nbogus = 1",
            "vibesys.agent_gpu.bogus: unknown key (allowed: partitions, max_gpus, "
            "max_time_minutes, default_time_minutes, windows_command, job_name_prefix, "
            "srun_arguments, "
            "read_only_paths, max_concurrent_jobs, profilers)",
        ),
        (
            "max_gpus = 8",
            "max_gpus = 8\ngate_gpus = 1",
            "vibesys.agent_gpu.gate_gpus: unknown key (trusted evaluation is sized by [slurm] "
            "sbatch_arguments)",
        ),
        (
            "max_gpus = 8",
            'max_gpus = 8\nsrun_command = ["srun"]',
            "vibesys.agent_gpu.srun_command: unknown key (Slurm commands run through "
            "[slurm.transport] shell_command)",
        ),
        (
            'shell_command = ["bash", "-c"]',
            "shell_command = []",
            "slurm.transport.shell_command: Tuple should have at least 1 item after validation, "
            "not 0",
        ),
        (
            'shell_command = ["bash", "-c"]',
            'shell_command = "bash -c"',
            "slurm.transport.shell_command: Input should be a valid tuple",
        ),
        (
            'shell_command = ["bash", "-c"]',
            'shell = ["bash"]',
            "slurm.transport.shell: unknown key (allowed: kind, shell_command)",
        ),
        (
            'kind = "local"',
            'kind = "k8s"',
            "slurm.transport.kind: 'k8s' is not one of 'local', 'ssh'",
        ),
        ('kind = "local"', "", "slurm.transport.kind: missing (one of 'local', 'ssh')"),
        ('kind = "local"', 'kind = "ssh"', "slurm.transport.host: Field required"),
        (
            'kind = "local"',
            'kind = "ssh"\nhost = "login"',
            'vibesys.agent_gpu needs [slurm.transport] kind = "local" (this host must be a Slurm '
            "submit node), not 'ssh'",
        ),
        (
            'name = "local-cluster"',
            'name = "local cluster"',
            "slurm.name: 'local cluster' must be letters, digits, '.', '_' or '-'",
        ),
        (
            'remote_workspace_root = "/shared/vibesys"',
            'remote_workspace_root = "/shared/%j"',
            "slurm.remote_workspace_root: '/shared/%j' may hold only letters, digits and "
            ". _ / + @ : , = - (it is written into #SBATCH lines)",
        ),
        (
            'remote_workspace_root = "/shared/vibesys"',
            'remote_workspace_root = "shared"',
            "slurm.remote_workspace_root: 'shared' must be an absolute path other than /",
        ),
        (
            'remote_workspace_root = "/shared/vibesys"',
            "",
            "slurm.remote_workspace_root: Field required",
        ),
        (
            'name = "local-cluster"',
            'name = "c"\nzzz = 1',
            "slurm.zzz: unknown key (allowed: name, remote_workspace_root, sbatch_arguments, "
            "poll_initial_seconds, poll_floor_seconds, poll_max_seconds, poll_backoff, "
            "probe_seconds, poll_settle_seconds, poll_settle_max_seconds, sacct_lag_seconds, "
            "command_timeout_seconds, transport)",
        ),
        (
            'name = "local-cluster"',
            'name = "c"\npoll_initial_seconds = 5\npoll_max_seconds = 2',
            "slurm.poll_max_seconds: 2.0 is less than poll_initial_seconds (5.0)",
        ),
        (
            'name = "local-cluster"',
            'name = "c"\npoll_settle_seconds = 2\npoll_settle_max_seconds = 1',
            "slurm.poll_settle_max_seconds: 1.0 is less than poll_settle_seconds (2.0)",
        ),
        (
            'name = "local-cluster"',
            'name = "c"\npoll_backoff = 0.5',
            "slurm.poll_backoff: Input should be greater than or equal to 1",
        ),
        (
            'name = "local-cluster"',
            'name = "c"\nsacct_lag_seconds = -1',
            "slurm.sacct_lag_seconds: Input should be greater than or equal to 0",
        ),
        (
            'name = "local-cluster"',
            'name = "c"\ncommand_timeout_seconds = 0',
            "slurm.command_timeout_seconds: Input should be greater than 0",
        ),
        (
            'name = "local-cluster"',
            'name = "c"\nsbatch_arguments = ["--job-name=x"]',
            "slurm.sbatch_arguments: '--job-name=x': vibesys sets --job-name for every sbatch job "
            "itself",
        ),
        (
            'name = "local-cluster"',
            'name = "c"\nsbatch_arguments = ["-Jx"]',
            "slurm.sbatch_arguments: '-Jx': vibesys sets --job-name for every sbatch job itself",
        ),
        (
            'name = "local-cluster"',
            'name = "c"\nsbatch_arguments = ["--requeue"]',
            "slurm.sbatch_arguments: '--requeue': vibesys sets --requeue for every sbatch job "
            "itself",
        ),
        (
            'name = "local-cluster"',
            'name = "c"\nsbatch_arguments = ["--comment=a\\nb"]',
            "slurm.sbatch_arguments: '--comment=a\\nb' contains whitespace; write it as "
            "'--option=value'",
        ),
        (
            "[vibesys.agent_gpu]",
            "[vibesys.other]",
            "vibesys.other: unknown key (allowed: agent_gpu)",
        ),
    ],
)
def test_bad_values_are_rejected_naming_the_key(old: str, new: str, expected: str) -> None:
    assert old in EXAMPLE
    assert error_of(EXAMPLE.replace(old, new, 1)) == f"slurm.toml: {expected}"


def test_a_top_level_unknown_table_is_named() -> None:
    assert error_of(MINIMAL + "\n[slurmx]\na = 1\n") == (
        "slurm.toml: slurmx: unknown key (allowed: slurm, vibesys)"
    )


def test_a_missing_slurm_table_is_named() -> None:
    assert error_of("[vibesys]\n") == "slurm.toml: slurm: Field required"


def test_several_errors_report_the_first_and_count_the_rest() -> None:
    text = EXAMPLE.replace("max_gpus = 8", "max_gpus = 0").replace(
        "max_time_minutes = 120", "max_time_minutes = 0"
    )
    assert error_of(text) == (
        "slurm.toml: vibesys.agent_gpu.max_gpus: Input should be greater than 0 (and 1 more)"
    )


def test_bad_toml_is_one_line_with_its_position() -> None:
    message = error_of("[slurm\nname = 1\n")
    assert message.startswith("slurm.toml: invalid TOML: ")
    assert "line 1" in message
