"""slurm.toml's values: the documented example and a minimal file load with every value and
default, the poll interval's back-off, the loader's edges (a missing, unreadable or non-UTF-8
file, the default path), and a loaded config is frozen with every field described."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from tests.helpers.slurm_toml import DATA, EXAMPLE, MINIMAL
from vibesys.config.load import default_slurm_config_path, load_slurm_config, parse_slurm_config
from vibesys.config.slurm import AgentGpuConfig, SlurmConfig, SlurmSiteConfig, VibesysTable
from vibesys.config.transport import LocalTransportConfig, SshTransportConfig
from vibesys.errors import ConfigError


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
    assert slurm.poll_settle_seconds == 2.0
    assert slurm.poll_settle_max_seconds == 4.0
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
