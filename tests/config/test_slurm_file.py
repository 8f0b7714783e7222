"""The site file a run starts from: a slurm.toml, or a file holding the deprecated [slurm_gpu]
table, translated once (one warning however many readers), its gate sizing applied to trusted
sbatch evaluations, and what it cannot carry over refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest
from msgspec import structs

from vibesys.adapters.slurm.request import SbatchRequest, SrunRequest, make_request
from vibesys.config import slurm_file
from vibesys.config.slurm_file import load_site_file, site_file_path, warn_once
from vibesys.config.slurm_gpu_alias import DEPRECATION_WARNING
from vibesys.errors import ConfigError, UsageError

OLD = """[slurm_gpu]
partitions = ["priority", "main"]
max_gpus = 2
max_time_minutes = 60
default_time_minutes = 5
gate_gpus = 2
gate_time_minutes = 7
max_concurrent_jobs = 1
"""


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(slurm_file, "_WARNED", set())
    return tmp_path


def test_a_slurm_gpu_file_is_translated_with_its_gate(tmp_path: Path) -> None:
    path = tmp_path / "old.toml"
    path.write_text(OLD)
    loaded = load_site_file(path)
    assert loaded.warning == DEPRECATION_WARNING
    assert loaded.config.slurm.remote_workspace_root == f"{tmp_path}/.cache/vibesys/slurm-gpu-stage"
    agent = loaded.config.agent_gpu
    assert agent is not None and (agent.max_gpus, agent.max_concurrent_jobs) == (2, 1)
    assert loaded.gate is not None and (loaded.gate.gpus, loaded.gate.time_minutes) == (2, 7)


def test_a_plain_slurm_toml_has_no_gate_and_no_warning(tmp_path: Path) -> None:
    path = tmp_path / "slurm.toml"
    path.write_text('[slurm]\nname = "x"\nremote_workspace_root = "/r"\n[slurm.transport]\n')
    with pytest.raises(ConfigError, match=r"slurm\.transport\.kind"):
        load_site_file(path)
    path.write_text('[slurm]\nname = "x"\nremote_workspace_root = "/r"\n')
    path.write_text(path.read_text() + '[slurm.transport]\nkind = "local"\n')
    loaded = load_site_file(path)
    assert (loaded.gate, loaded.warning) == (None, None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (OLD + 'gpu_type = "a100"\n', "old.toml: slurm_gpu.gpu_type: unknown key, cannot be"),
        (OLD + '[slurm]\nname = "x"\n', "cannot be combined with [slurm]; keep one"),
        ("slurm_gpu = 3\n", "slurm_gpu must be a table"),
        (OLD.replace("gate_gpus = 2", "gate_gpus = 3"), "gate_gpus: 3 exceeds max_gpus (2)"),
    ],
)
def test_what_cannot_be_carried_over_names_the_file_and_the_key(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "old.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_site_file(path)
    assert message in str(caught.value)


def test_the_old_default_file_is_used_when_slurm_toml_does_not_exist(home: Path) -> None:
    config = home / ".config" / "vibesys"
    config.mkdir(parents=True)
    assert site_file_path(None) == config / "slurm.toml"
    (config / "slurm-gpu.toml").write_text(OLD)
    assert site_file_path(None) == config / "slurm-gpu.toml"
    (config / "slurm.toml").write_text("")
    assert site_file_path(None) == config / "slurm.toml"
    assert site_file_path(Path("rel.toml")) == Path("rel.toml").resolve()


def test_one_warning_however_many_readers(capsys: pytest.CaptureFixture[str]) -> None:
    for _ in range(3):
        warn_once(DEPRECATION_WARNING)
    warn_once(None)
    assert capsys.readouterr().err == f"vibesys: warning: {DEPRECATION_WARNING}\n"


def test_a_trusted_evaluation_from_a_slurm_gpu_file_gets_the_gate_sizing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "old.toml"
    path.write_text(OLD)
    gate = make_request("sbatch", {"slurm_config": path})
    assert isinstance(gate, SbatchRequest)
    assert (gate.gpus, gate.time_minutes, gate.partitions) == (2, 7, ("priority", "main"))
    asked = make_request("sbatch", {"slurm_config": path, "gpus": 1, "time_minutes": 3})
    assert (asked.gpus, asked.time_minutes) == (1, 3)
    with pytest.raises(UsageError, match=r"--gpus 3 exceeds slurm_gpu.max_gpus \(2\)"):
        make_request("sbatch", {"slurm_config": path, "gpus": 3})
    # The agent's srun keeps the agent's limits (and its default time).
    agent = make_request("srun", {"slurm_config": path})
    assert isinstance(agent, SrunRequest) and (agent.gpus, agent.time_minutes) == (0, 5)
    assert capsys.readouterr().err.count("deprecated") == 1
    # What is recorded is the translation, which reads back without the old table.
    assert gate.site_record is not None and "[slurm_gpu]" not in gate.site_record.text
    assert gate.site() == load_site_file(path).config


def test_another_rendering_of_one_file_is_another_adapter_instance(tmp_path: Path) -> None:
    """Invocations recorded with different renderings of the same path never share an
    adapter (and so never a transport built from the wrong one)."""
    path = tmp_path / "old.toml"
    path.write_text(OLD)
    first = make_request("srun", {"slurm_config": path})
    path.write_text(OLD.replace("max_gpus = 2", "max_gpus = 1").replace("gate_gpus = 2", ""))
    second = make_request("srun", {"slurm_config": path})
    assert first.site_config == second.site_config
    assert first.backend_key() != second.backend_key()
    assert first.backend_key() == structs.replace(first).backend_key()


SITES = {
    "local, agents": OLD,
    "ssh": '[slurm]\nname = "a"\nremote_workspace_root = "/r"\n[slurm.transport]\nkind = "ssh"\n'
    'host = "login"\nidentity_file = "~/.ssh/k"\nenv_allowlist = ["A"]\n',
    "ssh, jump host": '[slurm]\nname = "a"\nremote_workspace_root = "/r"\n'
    'sbatch_arguments = ["--account=x"]\n[slurm.transport]\nkind = "ssh"\nhost = "login"\n'
    'jump_host = "bastion"\njump_port = 2200\nuser = "me"\npersist_seconds = 0.0\n',
}


@pytest.mark.parametrize("text", SITES.values(), ids=SITES)
def test_a_rendering_reads_back_as_the_same_settings(tmp_path: Path, text: str) -> None:
    """What a process reads back from the journal is exactly what was recorded."""
    from vibesys.config.load import recorded_slurm
    from vibesys.config.site import slurm_site

    path = tmp_path / "site.toml"
    path.write_text(text)
    config = load_site_file(path).config
    recorded = slurm_site(config)
    assert recorded_slurm(recorded) == config
    assert slurm_site(recorded_slurm(recorded)) == recorded  # canonical: a fixed point
