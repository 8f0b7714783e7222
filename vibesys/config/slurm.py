"""The operator's Slurm site configuration (`slurm.toml`): strict, frozen pydantic models.

Strict mode: TOML already carries types, so `max_gpus = "8"` or `max_gpus = true` is a mistake
to report, not a value to coerce. Sequences are tuples so a loaded config cannot be mutated.
Only typed objects leave this package; nothing here runs a command or touches the network.
"""

from __future__ import annotations

import posixpath
import re
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

__all__ = [
    "AgentGpuConfig",
    "LocalTransportConfig",
    "SlurmConfig",
    "SlurmSiteConfig",
    "SshTransportConfig",
    "TransportConfig",
    "VibesysTable",
]

_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)

#: TOML arrays arrive as lists; lax mode for the container only (items stay strict).
StrTuple = Annotated[tuple[str, ...], Field(strict=False)]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Characters allowed in a remote path that is also written into `#SBATCH --output=` lines:
#: sbatch expands `%` there and splits directives on whitespace, so both are excluded.
_SAFE_PATH = re.compile(r"^/[A-Za-z0-9._/+@:,=-]*$")

#: sbatch options vibesys sets itself: a site value would break naming, logs or retries.
_SBATCH_OWNED: Final = (
    ("--job-name", "-J"),
    ("--output", "-o"),
    ("--error", "-e"),
    ("--chdir", "-D"),
    ("--dependency", "-d"),
    ("--array", "-a"),
    ("--clusters", "-M"),
    ("--wait", "-W"),
    ("--parsable", None),
    ("--requeue", None),
    ("--no-requeue", None),
    ("--kill-on-invalid-dep", None),
    ("--wrap", None),
)
#: srun options vibesys sets from the request, or that would attach to someone else's job.
_SRUN_OWNED: Final = (
    ("--job-name", "-J"),
    ("--partition", "-p"),
    ("--time", "-t"),
    ("--gpus", "-G"),
    ("--gres", None),
    ("--jobid", None),
    ("--chdir", "-D"),
)


def _owned_option(argument: str, owned: tuple[tuple[str, str | None], ...]) -> str | None:
    for long, short in owned:
        if argument == long or argument.startswith(long + "="):
            return long
        if short is not None and argument.startswith(short):
            return long
    return None


def _check_arguments(
    values: tuple[str, ...], owned: tuple[tuple[str, str | None], ...], program: str
) -> tuple[str, ...]:
    for argument in values:
        if not argument.startswith("-"):
            raise ValueError(
                f"{argument!r} is not an option; write each one as a single item such as "
                f"'--account=lab'"
            )
        if any(ch.isspace() for ch in argument):
            raise ValueError(f"{argument!r} contains whitespace; write it as '--option=value'")
        taken = _owned_option(argument, owned)
        if taken is not None:
            raise ValueError(f"{argument!r}: vibesys sets {taken} for every {program} job itself")
    return values


def _check_absolute(path: str) -> str:
    if not path.startswith("/") or path == "/":
        raise ValueError(f"{path!r} must be an absolute path other than /")
    if posixpath.normpath(path) != path or path.startswith("//"):
        raise ValueError(f"{path!r} is not normalized (no '.', '..', repeated or trailing '/')")
    return path


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
        if value is not None and not _ENV_NAME.match(value):
            raise ValueError(f"{value!r} is not an environment variable name")
        return value

    @field_validator("env_allowlist")
    @classmethod
    def _env_allowlist(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not _ENV_NAME.match(name):
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


class SlurmConfig(BaseModel):
    """The `[slurm]` table: which cluster, where jobs keep their files, how to poll."""

    model_config = _STRICT

    name: str = Field(description="A short name for this cluster, used in logs and evidence.")
    remote_workspace_root: str = Field(
        description="Absolute directory shared with the compute nodes; each attempt runs in "
        "<root>/<invocation>/<attempt>/."
    )
    sbatch_arguments: StrTuple = Field(
        default=(),
        description="Site options added to every batch script, one option per item "
        "(for example '--account=lab').",
    )
    poll_initial_seconds: float = Field(
        default=2.0,
        gt=0,
        description="Delay between status rounds while the site's youngest watched job is new "
        "(and before the first round of newly watched jobs).",
    )
    poll_floor_seconds: float = Field(
        default=1.0,
        gt=0,
        description="The least time between two status rounds of this site, for every vibesys "
        "process on this host together (raised when the site's RPC rate limit asks for more). "
        "A job's end found by the probe is confirmed by the next round this floor allows.",
    )
    poll_max_seconds: float = Field(
        default=30.0, gt=0, description="The ceiling the status delay backs off to."
    )
    poll_backoff: float = Field(
        default=3.0,
        ge=1.0,
        description="How the delay grows with the youngest watched job's age: it is "
        "(backoff - 1) x that age (3.0: rounds at ages 2, 6, 18, ... seconds). The probe of "
        "exit markers sees a job's normal end between rounds, so the rounds themselves "
        "are for what leaves no marker (a job killed, a node lost) and for the queue.",
    )
    probe_seconds: float = Field(
        default=0.25,
        gt=0,
        description="How often, between status rounds, the watched jobs' exit markers are "
        "looked for (a file check, or one remote command over SSH; never a scheduler call): a "
        "job that ends is seen within about this long, and one status round confirms it.",
    )
    poll_settle_seconds: float = Field(
        default=1.0,
        ge=0,
        description="How long the status round that confirms an end found by the probe waits "
        "for the other watched jobs, still running, to end too: the jobs of a batch end "
        "within a second or two of each other, and one round confirms them all instead of "
        "one round each. A lone job's end (no other job still running) is confirmed at once.",
    )
    sacct_lag_seconds: float = Field(
        default=10.0,
        ge=0,
        description="How long after a job's end (or submission) sacct may not yet show it; "
        "absence from sacct proves nothing before this has passed.",
    )
    command_timeout_seconds: float = Field(
        default=60.0, gt=0, description="Time limit for one scheduler command (sbatch, sacct, ...)."
    )
    transport: TransportConfig = Field(description="How this host reaches Slurm.")

    def poll_interval(self, age_seconds: float) -> float:
        """Seconds to wait before the next status round for a job this old.

        Waiting a fixed fraction of the job's age grows the delay geometrically by
        `poll_backoff` per round without keeping any state: new jobs are seen finishing
        quickly, old ones cost the scheduler little."""
        grown = max(age_seconds, 0.0) * (self.poll_backoff - 1.0)
        return min(self.poll_max_seconds, max(self.poll_initial_seconds, grown))

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"{value!r} must be letters, digits, '.', '_' or '-'")
        return value

    @field_validator("remote_workspace_root")
    @classmethod
    def _root(cls, value: str) -> str:
        _check_absolute(value)
        if not _SAFE_PATH.match(value):
            raise ValueError(
                f"{value!r} may hold only letters, digits and . _ / + @ : , = - "
                "(it is written into #SBATCH lines)"
            )
        return value

    @field_validator("sbatch_arguments")
    @classmethod
    def _sbatch_arguments(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _check_arguments(value, _SBATCH_OWNED, "sbatch")

    @field_validator("poll_max_seconds")
    @classmethod
    def _poll_max(cls, value: float, info: ValidationInfo) -> float:
        initial = info.data.get("poll_initial_seconds")
        if initial is not None and value < initial:
            raise ValueError(f"{value} is less than poll_initial_seconds ({initial})")
        return value


class AgentGpuConfig(BaseModel):
    """The `[vibesys.agent_gpu]` table: limits for the agent's own GPU commands (srun)."""

    model_config = _STRICT

    partitions: StrTuple = Field(
        min_length=1,
        description="Partitions in preference order; one is used only if its sinfo time "
        "limit fits the request.",
    )
    max_gpus: int = Field(gt=0, description="Most GPUs one command may request.")
    max_time_minutes: int = Field(gt=0, description="Longest time limit one command may request.")
    default_time_minutes: int = Field(
        gt=0, description="Time limit when the request names none; at most max_time_minutes."
    )
    windows_command: StrTuple | None = Field(
        default=None,
        min_length=1,
        description="argv of a command reporting which partitions start a job now; when it "
        "fails only that preference is dropped.",
    )
    job_name_prefix: str = Field(
        default="vibesys-gpu",
        description="Prefix of every agent job's Slurm job name: <prefix>-<invocation>-<attempt>.",
    )
    srun_arguments: StrTuple = Field(
        default=(),
        description="Site options added to every agent srun, one option per item; never to "
        "batch jobs.",
    )
    read_only_paths: StrTuple = Field(
        default=(),
        description="Absolute, normalized host paths the agent's jobs may read (never write) "
        "besides the workspace and the system directories.",
    )
    max_concurrent_jobs: int | None = Field(
        default=None,
        gt=0,
        description="At most this many of one run's GPU jobs are submitted at once; "
        "omit for no cap.",
    )

    @field_validator("partitions")
    @classmethod
    def _partitions(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for partition in value:
            if not _NAME.match(partition):
                raise ValueError(f"{partition!r} is not a partition name")
        if len(set(value)) != len(value):
            raise ValueError("lists a partition twice")
        return value

    @field_validator("default_time_minutes")
    @classmethod
    def _default_time(cls, value: int, info: ValidationInfo) -> int:
        limit = info.data.get("max_time_minutes")
        if limit is not None and value > limit:
            raise ValueError(f"{value} exceeds max_time_minutes ({limit})")
        return value

    @field_validator("job_name_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"{value!r} must be letters, digits, '.', '_' or '-'")
        return value

    @field_validator("srun_arguments")
    @classmethod
    def _srun_arguments(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _check_arguments(value, _SRUN_OWNED, "srun")

    @field_validator("read_only_paths")
    @classmethod
    def _read_only_paths(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for path in value:
            _check_absolute(path)
        return value


class VibesysTable(BaseModel):
    """The `[vibesys]` table of slurm.toml."""

    model_config = _STRICT

    agent_gpu: AgentGpuConfig | None = Field(
        default=None, description="Lets the agent run its own GPU commands through srun."
    )


class SlurmSiteConfig(BaseModel):
    """The whole of slurm.toml."""

    model_config = _STRICT

    slurm: SlurmConfig = Field(description="The cluster and how to reach it.")
    vibesys: VibesysTable = Field(
        default_factory=VibesysTable, description="vibesys features that use this cluster."
    )

    @model_validator(mode="after")
    def _agent_gpu_needs_local(self) -> SlurmSiteConfig:
        # The agent's jobs share the workspace path with this host: only true on a submit node.
        if self.vibesys.agent_gpu is not None and self.slurm.transport.kind != "local":
            raise ValueError(
                'vibesys.agent_gpu needs [slurm.transport] kind = "local" (this host must be '
                f"a Slurm submit node), not {self.slurm.transport.kind!r}"
            )
        return self

    @property
    def agent_gpu(self) -> AgentGpuConfig | None:
        return self.vibesys.agent_gpu
