"""How this host reaches a Slurm site (`[slurm.transport]` of slurm.toml): on this host, or
over SSH to a login node. Strict, frozen pydantic models; nothing here opens a connection."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from vibesys.config.strict import STRICT as _STRICT
from vibesys.config.strict import StrTuple

__all__ = ["LocalTransportConfig", "SshTransportConfig", "TransportConfig"]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class LocalTransportConfig(BaseModel):
    """Slurm commands run on this host, through `shell_command`."""

    model_config = _STRICT

    kind: Literal["local"] = Field(description="Selects this transport.")
    shell_command: StrTuple = Field(
        default=("bash", "-c"),
        min_length=1,
        description="The argv prefix that runs one shell command line; the quoted Slurm "
        "command is appended as the last argument (a login-container wrapper may precede it).",
    )


class SshTransportConfig(BaseModel):
    """Slurm commands run on a login node over SSH, one connection serving many commands."""

    model_config = _STRICT

    kind: Literal["ssh"] = Field(description="Selects this transport.")
    host: str = Field(min_length=1, description="Login node host name or address.")
    port: int = Field(default=22, ge=1, le=65535, description="SSH port.")
    user: str | None = Field(
        default=None, min_length=1, description="Remote user name (default: the local user)."
    )
    identity_file: str | None = Field(
        default=None,
        min_length=1,
        description="Private key file; `~` is expanded at use. When set, only this key is "
        "offered (no ssh-agent, no default keys).",
    )
    passphrase_env: str | None = Field(
        default=None,
        description="Name of the environment variable holding the identity file's passphrase "
        "(the passphrase itself is never written in a file, log or error message).",
    )
    known_hosts: str | None = Field(
        default=None,
        min_length=1,
        description="known_hosts file used to verify the host key (default: ~/.ssh/known_hosts); "
        "unknown hosts are refused.",
    )
    accept_unknown_host: bool = Field(
        default=False,
        description="Trust a host whose key is not in known_hosts (remembered in memory for "
        "this process only, so a changed key is still refused on reconnect). Off by default.",
    )
    jump_host: str | None = Field(
        default=None,
        min_length=1,
        description="Bastion to connect through (like `ssh -J`); its key is verified against "
        "the same known_hosts and the same identity is used.",
    )
    jump_port: int = Field(default=22, ge=1, le=65535, description="SSH port of the jump host.")
    jump_user: str | None = Field(
        default=None, min_length=1, description="User on the jump host (default: `user`)."
    )
    connect_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description="How long opening the connection (TCP, handshake, authentication) may take.",
    )
    keepalive_seconds: float = Field(
        default=30.0, ge=0, description="Interval of SSH keepalives; 0 turns them off."
    )
    reconnect_attempts: int = Field(
        default=3,
        ge=1,
        le=20,
        description="Connection attempts before a command gives up when the connection is "
        "down; the command itself is never re-run by the transport.",
    )
    reconnect_backoff_seconds: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="Delay after the first failed attempt; it doubles after each one.",
    )
    env_allowlist: StrTuple = Field(
        default=(),
        description="Names of local environment variables passed to remote commands (when "
        "set); nothing else of the local environment is sent.",
    )
    shell_command: StrTuple = Field(
        default=(),
        description="A remote argv prefix that runs one shell command line, for sites whose "
        "commands need a shell of their own each time (a container wrapper, for example). "
        "Empty (the default): each command is started directly, with no shell.",
    )
    persist_seconds: float = Field(
        default=30.0,
        ge=0,
        le=86400,
        description="How long one connection to this site, shared by this host's vibesys "
        "processes, stays open after its last command (as OpenSSH's ControlPersist). A "
        "process that finds none connects on its own and, once its login and remote helper "
        "work, starts it in the background; later ones run their "
        "commands through it without logging in (a login, with a second factor on some "
        "sites, and the remote helper's start). 0: each process connects on its own.",
    )
    login_shell: bool = Field(
        default=False,
        description="Start the per-connection remote helper with a login shell (`bash -l`), "
        "so /etc/profile and ~/.bash_profile run once per connection. Sites whose Slurm "
        "commands come from `module load` in profile scripts need it; others should not pay "
        "for it. Without it the helper starts from the shell OpenSSH gives a command "
        "(non-login; bash reads ~/.bashrc there).",
    )

    @field_validator("passphrase_env")
    @classmethod
    def _passphrase_env(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not an environment variable name")
        return value

    @field_validator("env_allowlist")
    @classmethod
    def _env_allowlist(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name")
        if len(set(value)) != len(value):
            raise ValueError("lists a variable twice")
        return value

    @field_validator("shell_command")
    @classmethod
    def _shell_command(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if value and "=" in value[0]:
            raise ValueError(f"{value[0]!r}: the program name may not contain '='")
        return value

    @model_validator(mode="after")
    def _jump_options_need_a_jump_host(self) -> SshTransportConfig:
        if self.jump_host is None:
            stray = sorted({"jump_port", "jump_user"} & self.model_fields_set)
            if stray:
                raise ValueError(f"{', '.join(stray)} given without jump_host")
        return self


TransportConfig = Annotated[LocalTransportConfig | SshTransportConfig, Field(discriminator="kind")]
