"""The operator's Slurm site configuration (`slurm.toml`): strict, frozen pydantic models.

Strict mode: TOML already carries types, so `max_gpus = "8"` or `max_gpus = true` is a mistake
to report, not a value to coerce. Sequences are tuples so a loaded config cannot be mutated.
Only typed objects leave this package; nothing here runs a command or touches the network.
The `[slurm.transport]` models are in `vibesys.config.transport` (re-exported here).
"""

from __future__ import annotations

import posixpath
import re
from typing import Final

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

from vibesys.config.profiler import ProfilerConfig, check_profiler_name
from vibesys.config.strict import STRICT as _STRICT
from vibesys.config.strict import StrTuple
from vibesys.config.transport import LocalTransportConfig, SshTransportConfig, TransportConfig

__all__ = [
    "AgentGpuConfig",
    "LocalTransportConfig",
    "SlurmConfig",
    "SlurmSiteConfig",
    "SshTransportConfig",
    "TransportConfig",
    "VibesysTable",
]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: Characters allowed in a remote path that is also written into `#SBATCH --output=` lines:
#: sbatch expands `%` there and splits directives on whitespace, so both are excluded.
_SAFE_PATH = re.compile(r"/[A-Za-z0-9._/+@:,=-]*")

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
        default=2.0,
        ge=0,
        description="How long the status round that confirms an end found by the probe waits "
        "for the other watched jobs, still running, to end too: the jobs of a batch end "
        "within a second or two of each other (one that the scheduler started a second early "
        "ends a second early), and one round confirms them all instead of one round each. "
        "Each further end found waits this long again. A lone job's end (no other job still "
        "running) is confirmed at once.",
    )
    poll_settle_max_seconds: float = Field(
        default=4.0,
        ge=0,
        description="The longest the round that confirms ends waits after the first end found "
        "since the last round, while more keep coming (a batch that ends in waves, as the "
        "nodes free up): it bounds how late an ended job is seen.",
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
        if not _NAME.fullmatch(value):
            raise ValueError(f"{value!r} must be letters, digits, '.', '_' or '-'")
        return value

    @field_validator("remote_workspace_root")
    @classmethod
    def _root(cls, value: str) -> str:
        _check_absolute(value)
        if not _SAFE_PATH.fullmatch(value):
            raise ValueError(
                f"{value!r} may hold only letters, digits and . _ / + @ : , = - "
                "(it is written into #SBATCH lines)"
            )
        return value

    @field_validator("sbatch_arguments")
    @classmethod
    def _sbatch_arguments(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _check_arguments(value, _SBATCH_OWNED, "sbatch")

    @field_validator("poll_max_seconds", "poll_settle_max_seconds")
    @classmethod
    def _not_below_its_start(cls, value: float, info: ValidationInfo) -> float:
        """A ceiling below the value it bounds would silently never apply."""
        start = {
            "poll_max_seconds": "poll_initial_seconds",
            "poll_settle_max_seconds": "poll_settle_seconds",
        }[info.field_name or ""]
        lower = info.data.get(start)
        if lower is not None and value < lower:
            raise ValueError(f"{value} is less than {start} ({lower})")
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
    profilers: dict[str, ProfilerConfig] = Field(
        default_factory=dict,
        description="The profilers the agent may ask for by name "
        "([vibesys.agent_gpu.profilers.NAME]); none unless listed.",
    )

    def __hash__(self) -> int:
        # Frozen, but the profilers' table is a dict: hashed as its sorted items.
        fields = {**self.__dict__, "profilers": tuple(sorted(self.profilers.items()))}
        return hash(tuple(fields.values()))

    @field_validator("profilers")
    @classmethod
    def _profilers(cls, value: dict[str, ProfilerConfig]) -> dict[str, ProfilerConfig]:
        for name in value:
            check_profiler_name(name)
        return value

    @field_validator("partitions")
    @classmethod
    def _partitions(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for partition in value:
            if not _NAME.fullmatch(partition):
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
        if not _NAME.fullmatch(value):
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
