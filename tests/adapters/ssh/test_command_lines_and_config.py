"""The SSH transport's command lines, its configuration and a first connection that fails (no
server needed)."""

from __future__ import annotations

import shlex
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.paths import ROOT
from tests.helpers.ssh import PASSPHRASE
from vibesys.adapters.transports.configured import runner_from_config
from vibesys.adapters.transports.ssh import SshSettings, SshTransport
from vibesys.adapters.transports.ssh_settings import helper_argv, helper_launch
from vibesys.config.transport import SshTransportConfig
from vibesys.errors import BackendUnavailable, ConfigError


def login(
    *, env: dict[str, str] | None = None, passphrase: str | None = None, **settings: Any
) -> SshTransport:
    """A transport to `login` (never connected here); `settings` are `SshSettings` fields."""
    return SshTransport.from_settings(
        SshSettings(host="login", **settings), env=env, passphrase=passphrase
    )


def test_command_line_quotes_for_the_remote_shell() -> None:
    # The line for the user's shell when commands run one channel each (no helper).
    transport = login(env={})
    argv = ["printf", "%s", "a b", "$(x)", "it's"]
    assert shlex.split(transport.command_line(argv)) == argv
    with_shell = login(env={}, shell_command=("bash", "-c"))
    outer = shlex.split(with_shell.command_line(argv))
    assert outer[:2] == ["bash", "-c"]
    assert shlex.split(outer[2]) == argv


def test_a_login_shell_wraps_the_line_and_starts_the_helper() -> None:
    transport = login(env={}, login_shell=True)
    outer = shlex.split(transport.command_line(["squeue", "-h"]))
    assert outer[:2] == ["bash", "-lc"] and shlex.split(outer[2]) == ["squeue", "-h"]
    launch = shlex.split(helper_launch(transport.settings))
    assert launch[:2] == ["bash", "-lc"] and "exec" in launch[2]
    plain = shlex.split(helper_launch(SshSettings(host="login")))
    assert plain[:2] == ["sh", "-c"]


def test_the_helper_starts_argv_directly_unless_the_site_sets_a_shell() -> None:
    argv = ["squeue", "-h", "--name", "a b"]
    assert helper_argv(SshSettings(host="login"), argv) == argv
    wrapped = helper_argv(SshSettings(host="login", shell_command=("bash", "-c")), argv)
    assert wrapped[:2] == ["bash", "-c"] and shlex.split(wrapped[2]) == argv


def test_only_allowlisted_variables_travel_and_only_when_set() -> None:
    env = {"KEEP": "a 'b' $c", "DROP": "no", "PATH": "/local/bin"}
    transport = login(env_allowlist=("KEEP", "ABSENT"), env=env)
    outer = shlex.split(transport.command_line(["true"]))
    assert outer == ["env", "KEEP=a 'b' $c", "true"]
    assert "DROP" not in transport.command_line(["true"])


def test_secret_looking_allowlisted_values_count_as_secrets() -> None:
    env = {"HF_TOKEN": "hf_value", "MODE": "fast"}
    transport = login(env_allowlist=("HF_TOKEN", "MODE"), env=env, passphrase=PASSPHRASE)
    assert transport.secrets() == {"hf_value", PASSPHRASE}


def test_shell_command_may_not_look_like_an_assignment() -> None:
    with pytest.raises(ConfigError, match="'='"):
        SshSettings(host="login", shell_command=("A=1", "-c"))


def test_from_config_reads_the_passphrase_from_the_named_variable() -> None:
    config = SshTransportConfig(
        kind="ssh", host="login", passphrase_env="VIBESYS_TEST_PASSPHRASE", env_allowlist=("X",)
    )
    transport = SshTransport.from_config(config, env={"VIBESYS_TEST_PASSPHRASE": PASSPHRASE})
    assert PASSPHRASE in transport.secrets()
    assert transport.settings.env_allowlist == ("X",)
    with pytest.raises(ConfigError, match=r"passphrase_env: \$VIBESYS_TEST_PASSPHRASE is not set"):
        SshTransport.from_config(config, env={})


def test_runner_from_config_builds_an_ssh_transport_without_connecting() -> None:
    config = SshTransportConfig(kind="ssh", host="login.invalid", port=2200, user="op")
    runner = runner_from_config(config)
    assert isinstance(runner, SshTransport)
    assert (runner.label, runner.connection.connections) == ("op@login.invalid:2200", 0)


def test_the_cli_never_imports_paramiko() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "vibesys", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "paramiko" not in done.stderr


def test_first_connection_failure_is_backend_unavailable_after_bounded_backoff(
    tmp_path: Path,
) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now: connection refused at once
    slept: list[float] = []
    settings = SshSettings(
        host="127.0.0.1",
        port=port,
        known_hosts=str(tmp_path / "known_hosts"),
        reconnect_attempts=4,
        reconnect_backoff=0.5,
    )
    transport = SshTransport.from_settings(settings, sleep=slept.append)
    (tmp_path / "known_hosts").write_text("")
    with pytest.raises(BackendUnavailable) as caught:
        transport.run(["true"], maybe_effect=True)
    assert type(caught.value) is BackendUnavailable
    assert caught.value.maybe_submitted is False
    assert slept == [0.5, 1.0, 2.0]
    assert "after 4 attempts" in str(caught.value)
    assert transport.connection.connections == 0
