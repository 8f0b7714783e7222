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
    assert (config.jump_host, config.jump_user, config.jump_port) == ("bastion.example", "jump", 22)
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


def test_the_login_node_is_reached_only_when_a_command_needs_it(tmp_path: Path) -> None:
    from vibesys.adapters.skypilot import SkyEnvironment, build_backend
    from vibesys.adapters.skypilot.request import SkyPilotRequest
    from vibesys.errors import BackendMisconfigured

    clusters = tmp_path / "clusters.toml"
    clusters.write_text(
        '[profiles.p]\nrunner = "skypilot"\ninfra = "slurm/site-a"\n'
        'allocation_time = "01:00:00"\nremote_artifact_root = "/scratch/v"\n'
    )
    request = SkyPilotRequest(clusters_config=str(clusters), profile="p", run_id="r")
    # No ~/.slurm/config in SkyPilot's client home: building the adapter still works (logs of
    # finished jobs, journal show) ...
    backend = build_backend(request, SkyEnvironment(venv=tmp_path, home=tmp_path / "home"))
    # ... and the first command that needs the login node says what to fix.
    with pytest.raises(BackendMisconfigured) as caught:
        backend.dirs.runner.run(["true"])
    assert "no such file" in str(caught.value) and "VIBESYS_SKY_LOGIN" in caught.value.fix
    assert not caught.value.retryable


@pytest.mark.parametrize(
    ("jump", "expected"),
    [
        ("bastion", {"jump_host": "bastion", "jump_user": None, "jump_port": 22}),
        ("ops@bastion:2200", {"jump_host": "bastion", "jump_user": "ops", "jump_port": 2200}),
        ("ssh://ops@bastion:2201", {"jump_host": "bastion", "jump_user": "ops", "jump_port": 2201}),
        ("[2001:db8::1]:2202", {"jump_host": "2001:db8::1", "jump_user": None, "jump_port": 2202}),
        ("2001:db8::1", {"jump_host": "2001:db8::1", "jump_user": None, "jump_port": 22}),
        ("none", {"jump_host": None, "jump_user": None, "jump_port": 22}),
    ],
)
def test_proxyjump_keeps_the_hops_user_and_port(
    tmp_path: Path, jump: str, expected: dict[str, object]
) -> None:
    write_config(tmp_path, f"Host site-a\n  HostName login.example\n  ProxyJump {jump}\n")
    config = login_transport_config("slurm/site-a", tmp_path)
    assert {key: getattr(config, key) for key in expected} == expected


@pytest.mark.parametrize("jump", ["a@one,b@two", "bastion:ssh", "@:22"])
def test_a_proxyjump_that_cannot_be_followed_is_one_config_line(tmp_path: Path, jump: str) -> None:
    write_config(tmp_path, f"Host site-a\n  HostName login.example\n  ProxyJump {jump}\n")
    with pytest.raises(ConfigError, match="ProxyJump"):
        login_transport_config("slurm/site-a", tmp_path)
