"""slurm.toml: strict models, one-line errors naming the key, defaults, and the loader's edges."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from vibesys.config import (
    AgentGpuConfig,
    LocalTransportConfig,
    SlurmConfig,
    SlurmSiteConfig,
    SshTransportConfig,
    VibesysTable,
    default_slurm_config_path,
    load_slurm_config,
    parse_slurm_config,
)
from vibesys.errors import ConfigError

DATA = Path(__file__).with_name("data")
EXAMPLE = (DATA / "slurm.example.toml").read_text(encoding="utf-8")

MINIMAL = """
[slurm]
name = "c"
remote_workspace_root = "/shared/v"
[slurm.transport]
kind = "local"
"""


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_slurm_config(text)
    message = str(caught.value)
    assert "\n" not in message, message
    return message


def test_the_documented_example_loads_with_every_value() -> None:
    config = load_slurm_config(DATA / "slurm.example.toml")
    assert config.slurm.name == "local-cluster"
    assert config.slurm.remote_workspace_root == "/shared/vibesys"
    assert config.slurm.transport == LocalTransportConfig(
        kind="local", shell_command=("bash", "-c")
    )
    gpu = config.agent_gpu
    assert gpu is not None
    assert gpu.partitions == ("main", "priority")
    assert (gpu.max_gpus, gpu.max_time_minutes, gpu.default_time_minutes) == (8, 120, 30)
    assert gpu.windows_command == ("slurm-windows", "--json")
    assert gpu.srun_arguments == ()
    assert gpu.read_only_paths == ("/opt/venvs/torch",)
    assert gpu.max_concurrent_jobs == 2
    assert gpu.job_name_prefix == "vibesys-gpu"


def test_defaults_of_a_minimal_file() -> None:
    config = parse_slurm_config(MINIMAL)
    slurm = config.slurm
    assert slurm.sbatch_arguments == ()
    assert slurm.poll_initial_seconds == 2.0
    assert slurm.poll_max_seconds == 30.0
    assert slurm.poll_backoff == 3.0
    assert slurm.probe_seconds == 0.25
    assert slurm.poll_settle_seconds == 1.0
    assert slurm.poll_floor_seconds == 1.0
    assert slurm.sacct_lag_seconds == 10.0
    assert slurm.command_timeout_seconds == 60.0
    assert isinstance(slurm.transport, LocalTransportConfig)
    assert slurm.transport.shell_command == ("bash", "-c")
    assert config.agent_gpu is None


def test_poll_interval_starts_fast_and_backs_off_to_the_ceiling() -> None:
    slurm = parse_slurm_config(MINIMAL).slurm
    assert slurm.poll_interval(0) == 2.0
    assert slurm.poll_interval(1.0) == 2.0
    assert slurm.poll_interval(10) == 20.0  # 10 s old * (3.0 - 1)
    assert slurm.poll_interval(1e6) == 30.0
    age, waits = 0.0, []
    while age < 200:
        waits.append(slurm.poll_interval(age))
        age += waits[-1]
    # Rounds at ages 0, 2, 6, 18, then every 30 s (the probe of exit markers sees normal
    # ends in between, so the rounds can back off faster than submitit's 0, 2, 4, 8, ...)
    assert waits[:4] == [2.0, 4.0, 12.0, 30.0]
    assert all(b / a <= 3.0 + 1e-9 for a, b in itertools.pairwise(waits))
    assert waits[-1] == 30.0
    assert len(waits) < 15  # a few rounds, not one per second


def test_the_ssh_variant_validates() -> None:
    config = load_slurm_config(DATA / "slurm.ssh.toml")
    transport = config.slurm.transport
    assert isinstance(transport, SshTransportConfig)
    assert (transport.host, transport.port, transport.user) == ("login.example.org", 2222, "op")
    assert transport.identity_file == "~/.ssh/id_ed25519"
    assert config.slurm.sbatch_arguments == ("--account=lab", "--qos=normal")
    assert config.slurm.poll_initial_seconds == 2.0  # a TOML integer is a fine float


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
            "read_only_paths, max_concurrent_jobs)",
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
            "probe_seconds, poll_settle_seconds, sacct_lag_seconds, command_timeout_seconds, "
            "transport)",
        ),
        (
            'name = "local-cluster"',
            'name = "c"\npoll_initial_seconds = 5\npoll_max_seconds = 2',
            "slurm.poll_max_seconds: 2.0 is less than poll_initial_seconds (5.0)",
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


def test_a_missing_file_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match=r"nope\.toml: no such file$"):
        load_slurm_config(path)


def test_a_directory_is_not_readable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_slurm_config(tmp_path)
    assert str(caught.value).startswith(f"{tmp_path}: cannot read: ")


def test_non_utf8_bytes_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "slurm.toml"
    path.write_bytes(b'[slurm]\nname = "\xff"\n')
    with pytest.raises(ConfigError, match=r"slurm\.toml: not UTF-8 text \(byte 16\)$"):
        load_slurm_config(path)


def test_errors_from_a_file_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "site.toml"
    path.write_text(EXAMPLE.replace("max_gpus = 8", "max_gpus = 0"), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_slurm_config(str(path))
    assert (
        str(caught.value) == f"{path}: vibesys.agent_gpu.max_gpus: Input should be greater than 0"
    )


def test_the_default_path_is_under_the_home_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_slurm_config_path() == tmp_path / ".config" / "vibesys" / "slurm.toml"
    with pytest.raises(ConfigError, match=r"\.config/vibesys/slurm\.toml: no such file"):
        load_slurm_config()
    path = tmp_path / ".config" / "vibesys" / "slurm.toml"
    path.parent.mkdir(parents=True)
    path.write_text(MINIMAL, encoding="utf-8")
    assert load_slurm_config().slurm.name == "c"


def test_a_loaded_config_cannot_be_changed() -> None:
    config = parse_slurm_config(EXAMPLE)
    with pytest.raises(ValidationError, match="frozen"):
        config.slurm.name = "other"
    gpu = config.agent_gpu
    assert gpu is not None
    assert isinstance(gpu.partitions, tuple)
    assert hash(config) == hash(parse_slurm_config(EXAMPLE))


@pytest.mark.parametrize(
    "model",
    [
        SlurmSiteConfig,
        SlurmConfig,
        LocalTransportConfig,
        SshTransportConfig,
        AgentGpuConfig,
        VibesysTable,
    ],
)
def test_every_field_is_described(model: type[BaseModel]) -> None:
    assert model.__doc__
    undocumented = [name for name, field in model.model_fields.items() if not field.description]
    assert undocumented == []
