"""`[slurm.transport] kind = "ssh"`: the SSH transport's options, strict, with one-line errors."""

from __future__ import annotations

import pytest

from vibesys.config.load import parse_slurm_config
from vibesys.config.transport import SshTransportConfig
from vibesys.errors import ConfigError

HEAD = """
[slurm]
name = "remote"
remote_workspace_root = "/scratch/vibesys"
[slurm.transport]
kind = "ssh"
host = "login.example.org"
"""


def transport_of(extra: str) -> SshTransportConfig:
    transport = parse_slurm_config(HEAD + extra).slurm.transport
    assert isinstance(transport, SshTransportConfig)
    return transport


def error_of(extra: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_slurm_config(HEAD + extra)
    message = str(caught.value)
    assert "\n" not in message, message
    return message


def test_defaults_are_safe() -> None:
    transport = transport_of("")
    assert transport.port == 22
    assert transport.accept_unknown_host is False
    assert (transport.jump_host, transport.jump_user, transport.jump_port) == (None, None, 22)
    assert transport.env_allowlist == ()
    assert transport.passphrase_env is None
    assert (transport.reconnect_attempts, transport.reconnect_backoff_seconds) == (3, 1.0)
    assert (transport.connect_timeout_seconds, transport.keepalive_seconds) == (10.0, 30.0)
    # No shell per command and no login shell: the helper starts each command directly.
    assert (transport.shell_command, transport.login_shell) == ((), False)


def test_every_option_is_read() -> None:
    transport = transport_of(
        """
port = 2222
user = "op"
identity_file = "~/.ssh/id_ed25519"
passphrase_env = "VIBESYS_SSH_PASSPHRASE"
known_hosts = "~/.ssh/known_hosts"
accept_unknown_host = true
jump_host = "bastion.example.org"
jump_port = 2200
jump_user = "hop"
connect_timeout_seconds = 5
keepalive_seconds = 0
reconnect_attempts = 5
reconnect_backoff_seconds = 0.5
env_allowlist = ["HF_TOKEN", "WANDB_MODE"]
shell_command = ["sh", "-c"]
"""
    )
    assert transport == SshTransportConfig(
        kind="ssh",
        host="login.example.org",
        port=2222,
        user="op",
        identity_file="~/.ssh/id_ed25519",
        passphrase_env="VIBESYS_SSH_PASSPHRASE",
        known_hosts="~/.ssh/known_hosts",
        accept_unknown_host=True,
        jump_host="bastion.example.org",
        jump_port=2200,
        jump_user="hop",
        connect_timeout_seconds=5.0,
        keepalive_seconds=0.0,
        reconnect_attempts=5,
        reconnect_backoff_seconds=0.5,
        env_allowlist=("HF_TOKEN", "WANDB_MODE"),
        shell_command=("sh", "-c"),
    )


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            'accept_unknown_host = "yes"',
            "slurm.transport.accept_unknown_host: Input should be a valid boolean",
        ),
        (
            'env_allowlist = ["HF TOKEN"]',
            "slurm.transport.env_allowlist: 'HF TOKEN' is not an environment variable name",
        ),
        (
            'env_allowlist = ["A", "A"]',
            "slurm.transport.env_allowlist: lists a variable twice",
        ),
        (
            'env_allowlist = "HF_TOKEN"',
            "slurm.transport.env_allowlist: Input should be a valid tuple",
        ),
        (
            'passphrase_env = "1PASS"',
            "slurm.transport.passphrase_env: '1PASS' is not an environment variable name",
        ),
        (
            "reconnect_attempts = 0",
            "slurm.transport.reconnect_attempts: Input should be greater than or equal to 1",
        ),
        (
            "reconnect_backoff_seconds = 0",
            "slurm.transport.reconnect_backoff_seconds: Input should be greater than 0",
        ),
        (
            "connect_timeout_seconds = 0",
            "slurm.transport.connect_timeout_seconds: Input should be greater than 0",
        ),
        ("jump_port = 0", "slurm.transport.jump_port: Input should be greater than or equal to 1"),
        ('jump_user = "hop"', "slurm.transport: jump_user given without jump_host"),
        (
            'shell_command = ["X=1", "-c"]',
            "slurm.transport.shell_command: 'X=1': the program name may not contain '='",
        ),
        ("password = 'hunter2'", "slurm.transport.password: unknown key"),
    ],
)
def test_mistakes_are_reported_naming_the_key(extra: str, expected: str) -> None:
    assert error_of(extra).startswith(f"slurm.toml: {expected}")
