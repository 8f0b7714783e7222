"""Pure rendering of what vibesys hands to Slurm: the batch script and the srun argv.

Both wrap the command the same way, so every Slurm job leaves the same files in its remote
attempt directory (the contract the local adapter also keeps, `vibesys.adapters.rundir.claim`):
- `claim`      host, UTC start time and Slurm job id, linked into place atomically before the
               command runs. If the attempt is claimed already (the engine's fence, or a
               duplicate job), the job runs nothing, leaves `refused` and exits 85;
- `exit_code`  the command's own exit status (bash reports 128+N when signal N killed it),
               written via a temporary file and a rename, so a reader never sees half of it;
- `stdout`, `stderr` (batch jobs only; srun streams them to its caller).
When the whole job is killed (scancel, time limit, node failure) no marker is written and the
scheduler's record is the only evidence.
"""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath
from typing import Final

from msgspec import Struct

from vibesys.adapters.rundir.claim import claim_shell
from vibesys.adapters.rundir.names import (
    EXIT_CODE_FILE,
    SETUP_FAILED_FILE,
    STDERR_FILE,
    STDOUT_FILE,
)
from vibesys.adapters.transports.base import check_argv, shell_join
from vibesys.errors import UsageError

__all__ = [
    "EXIT_CODE_FILE",
    "SCRIPT_FILE",
    "SRUN_WRAPPER",
    "STDERR_FILE",
    "STDOUT_FILE",
    "InvalidJobSpec",
    "SlurmJobSpec",
    "render_sbatch",
    "sbatch_argv",
    "srun_argv",
    "with_setup",
]

SCRIPT_FILE: Final = "job.sbatch"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# sbatch expands `%` in --output/--error and splits #SBATCH lines on whitespace; a path that
# needs neither quoting nor escaping there is also safe unquoted in the shell.
_SAFE_PATH = re.compile(r"/[A-Za-z0-9._/+@:,=-]*")
_JOB_ID = re.compile(r"[0-9]+")

# The claim records `uname -n`, not $HOSTNAME: srun exports the submitter's environment. It
# also records where the job runs (Slurm sets these in the job's own environment): an srun
# job's end is seen from its claim and marker, before any status round shows where it ran.
_CLAIM = claim_shell(
    "attempt_dir",
    {
        "slurm_job_id": '"${SLURM_JOB_ID:-}"',
        "slurm_node": '"${SLURMD_NODENAME:-}"',
        "slurm_partition": '"${SLURM_JOB_PARTITION:-}"',
        "slurm_cpus": '"${SLURM_CPUS_ON_NODE:-}"',
    },
)
_MARKER = (
    "rc=$?\n"
    f'printf \'%s\\n\' "$rc" > "$attempt_dir/{EXIT_CODE_FILE}.tmp"'
    f' && mv "$attempt_dir/{EXIT_CODE_FILE}.tmp" "$attempt_dir/{EXIT_CODE_FILE}"\n'
    'exit "$rc"\n'
)

#: The `bash -c` program srun runs: `bash -c SRUN_WRAPPER vibesys-srun ATTEMPT_DIR CMD...`. The
#: command arrives as positional arguments, so it is never re-parsed by any shell.
SRUN_WRAPPER: Final = f'attempt_dir=$1\nshift\n{_CLAIM}"$@"\n{_MARKER}'


class InvalidJobSpec(UsageError, ValueError):
    """A job spec that cannot be rendered safely; nothing was submitted."""


class SlurmJobSpec(Struct, frozen=True):
    """One Slurm job as vibesys renders it (sbatch or srun)."""

    job_name: str
    command: tuple[str, ...]
    #: the attempt's directory on the cluster's shared file system (markers, logs)
    remote_attempt_dir: PurePosixPath
    #: None: the partition's default time limit (a batch job's only; srun always names one)
    time_minutes: int | None
    gpus: int = 0
    #: candidate partitions; Slurm starts the job in whichever can run it first
    partitions: tuple[str, ...] = ()
    #: site options: [slurm] sbatch_arguments, or [vibesys.agent_gpu] srun_arguments
    extra_arguments: tuple[str, ...] = ()
    #: job id this one runs after (afterok); Slurm kills it when that job fails
    dependency: str | None = None
    #: the command's working directory; batch jobs default to `remote_attempt_dir`
    workdir: PurePosixPath | None = None

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.job_name):
            raise InvalidJobSpec(f"job name {self.job_name!r}: use letters, digits, . _ -")
        check_argv(self.command)
        _check_path("remote_attempt_dir", self.remote_attempt_dir)
        if self.workdir is not None:
            _check_path("workdir", self.workdir)
        if self.time_minutes is not None and self.time_minutes <= 0:
            raise InvalidJobSpec(f"time limit {self.time_minutes}: must be at least 1 minute")
        if self.gpus < 0:
            raise InvalidJobSpec(f"gpus {self.gpus}: must be 0 or more")
        for partition in self.partitions:
            if not _NAME.fullmatch(partition):
                raise InvalidJobSpec(f"partition {partition!r}: not a partition name")
        for argument in self.extra_arguments:
            if not argument.startswith("-") or any(ch.isspace() for ch in argument):
                raise InvalidJobSpec(f"site argument {argument!r}: must be one '--option=value'")
        if self.dependency is not None and not _JOB_ID.fullmatch(self.dependency):
            raise InvalidJobSpec(f"dependency {self.dependency!r}: not a job id")


def _check_path(what: str, path: PurePosixPath) -> None:
    text = str(path)
    if not _SAFE_PATH.fullmatch(text) or text == "/" or ".." in path.parts:
        raise InvalidJobSpec(f"{what} {text!r}: must be absolute and use only . _ / + @ : , = -")


def _resource_options(spec: SlurmJobSpec) -> list[str]:
    options = [f"--job-name={spec.job_name}"]
    if spec.gpus > 0:
        options.append(f"--gres=gpu:{spec.gpus}")
    if spec.time_minutes is not None:
        options.append(f"--time={spec.time_minutes}")
    if spec.partitions:
        options.append(f"--partition={','.join(spec.partitions)}")
    return options


def _names_mail_user(arguments: tuple[str, ...]) -> bool:
    """The site's options name a mail user and no mail type of their own."""
    named = any(a.startswith("--mail-user=") for a in arguments)
    return named and not any(a.startswith("--mail-type") for a in arguments)


def render_sbatch(spec: SlurmJobSpec) -> str:
    """The batch script for `spec`. Submit it with `sbatch_argv(path)`."""
    remote_attempt_dir = str(spec.remote_attempt_dir)
    options = _resource_options(spec)
    # vibesys owns retries: a requeue by Slurm would run an attempt twice under one name.
    options.insert(1, "--no-requeue")
    options += [
        f"--output={remote_attempt_dir}/{STDOUT_FILE}",
        f"--error={remote_attempt_dir}/{STDERR_FILE}",
        f"--chdir={spec.workdir or spec.remote_attempt_dir}",
        *spec.extra_arguments,
    ]
    if spec.dependency is not None:
        # A parent's job that fails gets the child killed by Slurm within a second, never left
        # PENDING for good looking like a job waiting for resources when no vibesys process
        # looks again. The engine proves it never ran and submits it again after the parent's
        # retry (engine/chains.py). A site that names a mail user hears of the kill.
        options += [f"--dependency=afterok:{spec.dependency}", "--kill-on-invalid-dep=yes"]
        if _names_mail_user(spec.extra_arguments):
            options.append("--mail-type=INVALID_DEPEND")
    lines = ["#!/bin/bash", *(f"#SBATCH {option}" for option in options)]
    lines += [
        "# Written by vibesys. The job claims its attempt before the command begins (and runs",
        "# nothing if the attempt is claimed already); exit_code is the command's own status",
        "# (128+N for signal N), written atomically after it ends.",
        f"attempt_dir={shlex.quote(remote_attempt_dir)}",
        _CLAIM.rstrip("\n"),
        shell_join(spec.command),
    ]
    return "\n".join(lines) + "\n" + _MARKER


def sbatch_argv(script_path: str | PurePosixPath) -> list[str]:
    """Submit a rendered script; `--parsable` makes stdout just `jobid[;cluster]`."""
    return ["sbatch", "--parsable", str(script_path)]


def srun_argv(spec: SlurmJobSpec) -> list[str]:
    """A foreground srun of `spec.command` that leaves the same markers as a batch job.
    Dependencies do not apply to a foreground job and are refused."""
    if spec.dependency is not None:
        raise InvalidJobSpec("srun jobs cannot depend on another job")
    argv = ["srun", *_resource_options(spec)]
    if spec.workdir is not None:
        argv.append(f"--chdir={spec.workdir}")
    argv += [
        *spec.extra_arguments,
        "bash",
        "-c",
        SRUN_WRAPPER,
        "vibesys-srun",
        str(spec.remote_attempt_dir),
    ]
    return [*argv, *spec.command]


#: The exit status of a job whose setup (snapshot copy and verification) failed: the command
#: never ran, and `setup_failed` (not `exit_code`) tells the reader why.
SETUP_FAILED_EXIT: Final = 86
_FAILED = f'"$attempt_dir/{SETUP_FAILED_FILE}'
_SETUP = (
    "attempt_dir=$1; work=$2; setup=$3; shift 3\n"
    f'sh -c "$setup" || {{ rc=$?; printf "%s\\n" "$rc" > {_FAILED}.tmp"'
    f' && mv {_FAILED}.tmp" {_FAILED}"; exit {SETUP_FAILED_EXIT}; }}\n'
    'cd "$work" && exec "$@"\n'
)


def with_setup(
    command: tuple[str, ...],
    setup: tuple[tuple[str, ...], ...],
    remote_attempt_dir: PurePosixPath,
    work_dir: PurePosixPath,
) -> tuple[str, ...]:
    """`command` preceded by `setup` commands that must all succeed first (copy the candidate
    snapshot into `work_dir`, verify its digest). When one fails the command never runs: the
    job leaves `setup_failed` with the failing status and exits SETUP_FAILED_EXIT."""
    if not setup:
        return command
    chained = " && ".join(shell_join(step) for step in setup)
    return (
        "sh",
        "-c",
        _SETUP,
        "vibesys-setup",
        str(remote_attempt_dir),
        str(work_dir),
        chained,
        *command,
    )
