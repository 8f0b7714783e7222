"""The login node's transport comes from SkyPilot's own ~/.slurm/config entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from vibesys.adapters.skypilot.login import login_transport_config, slurm_alias
from vibesys.errors import ConfigError


def write_config(home: Path, text: str) -> None:
    (home / ".slurm").mkdir(parents=True)
    (home / ".slurm" / "config").write_text(text)


def test_the_entry_of_the_infras_alias(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        "Host other\n  HostName elsewhere\n\n"
        "Host site-a\n  HostName login.example\n  Port 2222\n  User ana\n"
        "  IdentityFile /keys/id_site\n  UserKnownHostsFile /keys/known_hosts\n"
        "  ProxyJump jump@bastion.example:22\n",
    )
    config = login_transport_config("slurm/site-a/gpu", tmp_path)
    assert (config.host, config.port, config.user) == ("login.example", 2222, "ana")
    assert (config.identity_file, config.known_hosts) == ("/keys/id_site", "/keys/known_hosts")
    assert config.jump_host == "bastion.example"
    assert config.accept_unknown_host is False  # host keys are verified, unlike SkyPilot's own


def test_missing_file_or_host_is_one_config_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        login_transport_config("slurm/site-a", tmp_path)
    write_config(tmp_path, "Host other\n  HostName x\n")
    with pytest.raises(ConfigError, match="no Host site-a"):
        login_transport_config("slurm/site-a", tmp_path)


def test_the_infra_must_name_a_slurm_alias() -> None:
    assert slurm_alias("slurm/a/b") == "a"
    for infra in ("slurm", "k8s/ctx"):
        with pytest.raises(ConfigError, match="name the alias"):
            slurm_alias(infra)
