"""Pure parsing of Slurm 22.05 output, and its classification into `RemoteState`.

Each parser is paired with the exact format it reads (the constants below, used by the argv
builders here), so a query and its parser cannot drift apart. Raw lines are kept on every row:
they are the evidence a transition records.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from types import MappingProxyType
from typing import Final

from msgspec import Struct

from vibesys.adapters.base import TERMINAL_REMOTE, RemoteState, RemoteStatus
from vibesys.adapters.times import reported_time
from vibesys.errors import BackendUnavailable

__all__ = [
    "SACCT_FIELDS",
    "SACCT_FORMAT",
    "SACCT_PLACEHOLDER_NAME",
    "SLURM_STATES",
    "SQUEUE_FORMAT",
    "SacctRow",
    "SqueueRow",
    "UnparseableOutput",
    "classify",
    "never_satisfied",
    "parse_marker",
    "parse_sacct",
    "parse_sbatch_parsable",
    "parse_squeue",
    "parse_started",
    "sacct_argv",
    "squeue_argv",
]

#: `sacct -X -n -P -o SACCT_FORMAT`: one row per job (no steps), no header, `|`-separated. The
#: last three say where it ran (provenance).
SACCT_FIELDS: Final = (
    "JobID",
    "JobName",
    "State",
    "ExitCode",
    "Start",
    "End",
    "Reason",
    "Partition",
    "NodeList",
    "AllocTRES",
)
SACCT_FORMAT: Final = ",".join(SACCT_FIELDS)
#: `squeue -h -o SQUEUE_FORMAT`: id, name, state, reason, partition(s), gres; then where it runs
#: (provenance): node list, start, end (its limit while it runs), CPUs.
SQUEUE_FORMAT: Final = "%i|%j|%T|%r|%P|%b|%N|%S|%e|%C"

#: JobName sacct shows until slurmdbd has the job's real record (up to ~5 s after it ends).
SACCT_PLACEHOLDER_NAME: Final = "allocation"

#: Every Slurm job state (base states and the flags squeue/sacct report instead) we map.
#: Anything else is UNKNOWN: never guessed to be success or failure.
SLURM_STATES: Final[Mapping[str, RemoteState]] = MappingProxyType(
    {
        "PENDING": RemoteState.PENDING,
        "CONFIGURING": RemoteState.PENDING,
        "REQUEUED": RemoteState.PENDING,
        "REQUEUE_HOLD": RemoteState.PENDING,
        "REQUEUE_FED": RemoteState.PENDING,
        "RESV_DEL_HOLD": RemoteState.PENDING,
        "SUSPENDED": RemoteState.PENDING,
        "STOPPED": RemoteState.PENDING,
        "RUNNING": RemoteState.RUNNING,
        "COMPLETING": RemoteState.RUNNING,
        "SIGNALING": RemoteState.RUNNING,
        "STAGE_OUT": RemoteState.RUNNING,
        "RESIZING": RemoteState.RUNNING,
        "COMPLETED": RemoteState.COMPLETED,
        "FAILED": RemoteState.FAILED,
        "CANCELLED": RemoteState.CANCELLED,
        "TIMEOUT": RemoteState.TIMEOUT,
        # A deadline (--deadline) is a time limit the submitter set: the same class as TIMEOUT.
        "DEADLINE": RemoteState.TIMEOUT,
        "OUT_OF_MEMORY": RemoteState.OUT_OF_MEMORY,
        "NODE_FAIL": RemoteState.NODE_FAIL,
        "BOOT_FAIL": RemoteState.BOOT_FAIL,
        "PREEMPTED": RemoteState.PREEMPTED,
        "LAUNCH_FAILED": RemoteState.LAUNCH_FAILED,
    }
)

#: States in which the batch script ended on its own, so ExitCode is the command's status.
#: Otherwise Slurm killed it and ExitCode (often 0:0 on the job row) says nothing about it.
_ENDED_ON_ITS_OWN: Final = frozenset({"COMPLETED", "FAILED"})

_SBATCH_PARSABLE = re.compile(r"([0-9]+)(?:;([A-Za-z0-9_.-]+))?")
_SQUEUE_CODES: Final = {
    "%i": "job_id",
    "%j": "job_name",
    "%T": "state",
    "%r": "reason",
    "%P": "partition",
    "%b": "gres",
    "%N": "nodes",
    "%S": "start",
    "%e": "end",
    "%C": "cpus",
}


class UnparseableOutput(BackendUnavailable):
    """Slurm printed something this module does not understand; `evidence` holds it."""


class SacctRow(Struct, frozen=True):
    job_id: str
    job_name: str
    #: the state word: `CANCELLED` for `CANCELLED by 0`
    state: str
    #: the uid in `CANCELLED by <uid>`, when sacct says
    cancelled_by: str | None
    #: `a` of ExitCode `a:b` (the batch script's exit status); None when empty
    exit_status: int | None
    #: `b` of ExitCode `a:b` (the signal that ended it, 0 for none)
    exit_signal: int | None
    #: cluster-local times, naive as sacct prints them; None for Unknown/None
    start: datetime | None
    end: datetime | None
    reason: str | None
    line: str
    partition: str | None = None
    nodes: str | None = None
    #: TRES allocated to the job (cpu=..,mem=..,node=..,gres/gpu=..)
    alloc_tres: str | None = None


class SqueueRow(Struct, frozen=True):
    job_id: str
    job_name: str
    state: str
    reason: str | None
    partition: str | None
    gres: str | None
    line: str
    nodes: str | None = None
    #: as squeue prints them (cluster-local time); a pending job's start is a forecast, a
    #: running job's end its time limit
    start: str | None = None
    end: str | None = None
    cpus: str | None = None


def sacct_argv(
    *, job_ids: Sequence[str] = (), names: Sequence[str] = (), since: str | None = None
) -> list[str]:
    """One sacct call for many jobs, by ids or by names (sacct ANDs the two, so not both).
    Name lookups need `since` (e.g. `2026-11-30T01:00:00` or `now-300`): without it sacct
    looks from midnight only. They also miss jobs that never became eligible."""
    if bool(job_ids) == bool(names):
        raise ValueError("give job_ids or names, not both and not neither")
    argv = ["sacct", "-X", "-n", "-P", "-o", SACCT_FORMAT]
    if job_ids:
        return [*argv, "-j", ",".join(job_ids)]
    argv += ["--name", ",".join(names)]
    return [*argv, "-S", since] if since is not None else argv


def squeue_argv(*, job_ids: Sequence[str] = (), names: Sequence[str] = ()) -> list[str]:
    """One squeue call over all states (recently finished jobs too, until MinJobAge)."""
    if bool(job_ids) == bool(names):
        raise ValueError("give job_ids or names, not both and not neither")
    argv = ["squeue", "-h", "--states=all", "-o", SQUEUE_FORMAT]
    return [*argv, "-j", ",".join(job_ids)] if job_ids else [*argv, "--name", ",".join(names)]


def parse_sbatch_parsable(text: str) -> str:
    """The job id from `sbatch --parsable` stdout: `22`, or `24;vibesys` with --clusters.
    Anything else raises UnparseableOutput with `maybe_submitted` set: sbatch said it
    succeeded, so a job may exist that we cannot name by id."""
    match = _SBATCH_PARSABLE.fullmatch(text.strip())
    if match is None:
        raise UnparseableOutput(
            f"sbatch --parsable printed {text.strip()[:200]!r}, not a job id",
            evidence=text,
            maybe_submitted=True,
        )
    return match.group(1)


def parse_sacct(text: str, fields: Sequence[str] = SACCT_FIELDS) -> list[SacctRow]:
    """Rows of `sacct -n -P -o <fields>`; `fields` must include JobID, JobName, State and
    ExitCode. Step rows (`22.batch`) are skipped: the job row is the job's outcome."""
    missing = {"JobID", "JobName", "State", "ExitCode"} - set(fields)
    if missing:
        raise ValueError(f"sacct fields lack {', '.join(sorted(missing))}")
    rows = []
    for line in lines_of(text):
        values = _split(line, len(fields), fields.index("JobName"), "sacct")
        row = dict(zip(fields, values, strict=True))
        if "." in row["JobID"]:
            continue
        state, _, by = row["State"].rstrip("+").partition(" by ")
        status, signal = _exit_code(row["ExitCode"], line)
        rows.append(
            SacctRow(
                job_id=row["JobID"],
                job_name=row["JobName"],
                state=state.strip(),
                cancelled_by=by.strip() or None,
                exit_status=status,
                exit_signal=signal,
                start=reported_time(row.get("Start")),
                end=reported_time(row.get("End")),
                reason=row.get("Reason") or None,
                line=line,
                partition=row.get("Partition") or None,
                nodes=row.get("NodeList") or None,
                alloc_tres=row.get("AllocTRES") or None,
            )
        )
    return rows


def parse_squeue(text: str, format: str = SQUEUE_FORMAT) -> list[SqueueRow]:
    """Rows of `squeue -h -o <format>`, a `|`-separated list of %-codes including %i, %j
    and %T. Codes this module does not use are read and dropped."""
    codes = format.split("|")
    missing = {"%i", "%j", "%T"} - set(codes)
    if missing:
        raise ValueError(f"squeue format lacks {', '.join(sorted(missing))}")
    rows = []
    for line in lines_of(text):
        values = _split(line, len(codes), codes.index("%j"), "squeue")
        row = {
            _SQUEUE_CODES[c]: v for c, v in zip(codes, values, strict=True) if c in _SQUEUE_CODES
        }
        rows.append(
            SqueueRow(
                job_id=row["job_id"],
                job_name=row["job_name"],
                state=row["state"].rstrip("+"),
                reason=row.get("reason") or None,
                partition=row.get("partition") or None,
                gres=row.get("gres") or None,
                line=line,
                nodes=row.get("nodes") or None,
                start=row.get("start") or None,
                end=row.get("end") or None,
                cpus=row.get("cpus") or None,
            )
        )
    return rows


def parse_marker(text: str) -> int:
    """The exit status in a remote attempt directory's `exit_code` file."""
    value = text.strip()
    if not value.isdigit() or int(value) > 255:
        raise UnparseableOutput(f"exit_code marker holds {value[:40]!r}, not 0-255")
    return int(value)


def parse_started(text: str) -> dict[str, str]:
    """The `key=value` lines of a remote attempt directory's `started` record."""
    record = {}
    for line in lines_of(text):
        key, sep, value = line.partition("=")
        if sep:
            record[key.strip()] = value.strip()
    return record


def classify(
    row: SacctRow | SqueueRow,
    marker: int | None,
    cancel_requested_by_us: bool,
    *,
    job_name: str | None = None,
) -> RemoteStatus:
    """One job's RemoteStatus from its scheduler row and its `exit_code` marker (if read).

    `job_name` is the name we submitted under (default: the row's own). The exit code of a
    finished job prefers the marker (the command's own status); otherwise it comes from
    ExitCode `a:b` (128+b when signal b ended the script), and only for jobs that ended on
    their own: a killed job's ExitCode describes the kill, not the command.
    """
    source = "sacct" if isinstance(row, SacctRow) else "squeue"
    observation = f"{source}: {row.line}"
    if marker is not None:
        observation += f"; marker exit_code={marker}"
    name = job_name if job_name is not None else row.job_name
    if isinstance(row, SacctRow) and row.job_name == SACCT_PLACEHOLDER_NAME:
        # slurmdbd has not caught up: the state on this row may be stale (PENDING for a job
        # that already ended), so it is not evidence of anything yet.
        return RemoteStatus(
            name, row.job_id, RemoteState.UNKNOWN, observation=observation + " (sacct lag)"
        )
    state = SLURM_STATES.get(row.state, RemoteState.UNKNOWN)
    exit_code: int | None = None
    if state in TERMINAL_REMOTE:
        exit_code = marker
        if exit_code is None and isinstance(row, SacctRow) and row.state in _ENDED_ON_ITS_OWN:
            exit_code = _command_status(row)
    if state is RemoteState.COMPLETED and exit_code not in (None, 0):
        # A non-zero status is never success, whatever the job record says.
        state = RemoteState.FAILED
    cancelled_by: str | None = None
    if row.state == "CANCELLED" and never_satisfied(row):
        state = RemoteState.DEPENDENCY_NEVER_SATISFIED
    never_started = False
    if state is RemoteState.CANCELLED:
        if cancel_requested_by_us:
            cancelled_by = "vibesys"
        elif isinstance(row, SacctRow):
            cancelled_by = row.cancelled_by
            # Only sacct's record says who (squeue names no one) and whether it had a node.
            never_started = row.nodes in (None, "", "None assigned")
    reason = row.reason if row.reason not in (None, "None") else None
    return RemoteStatus(
        job_name=name,
        job_id=row.job_id,
        state=state,
        exit_code=exit_code,
        cancelled_by=cancelled_by,
        observation=observation,
        reason=reason,
        partition=row.partition if isinstance(row, SqueueRow) else None,
        nodes=row.nodes if isinstance(row, SqueueRow) else None,
        never_started=never_started,
    )


def never_satisfied(row: SacctRow | SqueueRow) -> bool:
    """Slurm cancelled the job itself because its dependency can never be satisfied
    (`--kill-on-invalid-dep=yes`): squeue's reason says so while the job is shown; sacct
    keeps the reason `Dependency` and, unlike for a scancel (`CANCELLED by <uid>`), no uid."""
    if isinstance(row, SqueueRow):
        return row.reason == "DependencyNeverSatisfied"
    return row.cancelled_by is None and row.reason == "Dependency"


def _command_status(row: SacctRow) -> int | None:
    if row.exit_signal:
        return 128 + row.exit_signal
    return row.exit_status


def lines_of(text: str) -> list[str]:
    return [line.rstrip("\r") for line in text.splitlines() if line.strip()]


def _split(line: str, count: int, name_index: int, what: str) -> list[str]:
    parts = line.split("|")
    if len(parts) < count:
        raise UnparseableOutput(f"{what} line {line!r}: expected {count} fields", evidence=line)
    extra = len(parts) - count
    if extra:
        # Only the job name is free text; a `|` inside it must not shift the other fields.
        name = "|".join(parts[name_index : name_index + extra + 1])
        parts = [*parts[:name_index], name, *parts[name_index + extra + 1 :]]
    return parts


def _exit_code(text: str, line: str) -> tuple[int | None, int | None]:
    if not text.strip():
        return None, None  # NODE_FAIL steps print an empty ExitCode
    status, sep, signal = text.strip().partition(":")
    if not (status.isdigit() and sep and signal.isdigit()):
        raise UnparseableOutput(f"sacct line {line!r}: bad ExitCode {text!r}", evidence=line)
    return int(status), int(signal)
