"""Pure parsers of what the `sky` CLI (0.14.1) prints, tested against real captured outputs
(`tests/data/sky/`). No I/O. Every parser either returns typed values or raises
SkyMalformedOutput; none guesses.

Facts they rely on (all observed): output is on stdout, ANSI colour codes appear even without a
terminal; `sky status -o json` prints blank lines and notices ("Cluster terminated on the cloud:
X") before a JSON list; `sky queue -o json` prints "Fetching job queue for: X" (and errors) before
a JSON object, `{}` when it could not ask; `sky exec` prints the job id only in the line
"⚙︎ Job submitted, ID: N"; `sky logs --status` prints "Job N: STATUS" (None when unknown).
"""

from __future__ import annotations

import json
import re
from enum import StrEnum
from typing import Any

from msgspec import Struct

from vibesys.adapters.skypilot.errors import SkyMalformedOutput

__all__ = [
    "ClusterRecord",
    "ClusterStatus",
    "QueueJob",
    "SkyJobStatus",
    "allocation_ids",
    "exit_code_line",
    "parse_job_id",
    "parse_logs_status",
    "parse_queue",
    "parse_status",
    "parse_version",
    "strip_ansi",
    "terminated_clusters",
]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_VERSION = re.compile(r"^skypilot, version (\S+)$", re.MULTILINE)
_JOB_SUBMITTED = re.compile(r"Job submitted, ID: (\d+)")
_LOGS_STATUS = re.compile(r"^Job (\d+): (\w+)$", re.MULTILINE)
_TERMINATED = re.compile(r"^Cluster terminated on the cloud: (\S+)$", re.MULTILINE)
_NODE_NAME = re.compile(r"^job(\d+)-")
#: The wrapper's last line; SkyPilot prefixes each log line with "(task name, pid=N) ".
EXIT_LINE_PREFIX = "vibesys: exit_code="
_EXIT_LINE = re.compile(r"(?:\([^)]*\) )?" + re.escape(EXIT_LINE_PREFIX) + r"(\d+)\s*")


class ClusterStatus(StrEnum):
    """`sky.ClusterStatus`."""

    INIT = "INIT"
    UP = "UP"
    STOPPED = "STOPPED"
    AUTOSTOPPING = "AUTOSTOPPING"
    PENDING = "PENDING"


class SkyJobStatus(StrEnum):
    """`sky.JobStatus` of a cluster job, in SkyPilot's order."""

    INIT = "INIT"
    PENDING = "PENDING"
    SETTING_UP = "SETTING_UP"
    RUNNING = "RUNNING"
    FAILED_DRIVER = "FAILED_DRIVER"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    FAILED_SETUP = "FAILED_SETUP"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        return self not in (self.INIT, self.PENDING, self.SETTING_UP, self.RUNNING)


class ClusterRecord(Struct, frozen=True):
    """One cluster of `sky status -o json`."""

    name: str
    status: ClusterStatus
    cloud: str | None
    region: str | None
    nodes: int
    cpus: str | None
    accelerators: str | None
    resources: str
    launched_at: int | None
    #: Slurm job ids of the allocation holding the cluster (from SkyPilot's node names)
    allocation: tuple[str, ...]


class QueueJob(Struct, frozen=True):
    """One job of `sky queue CLUSTER -o json`. SkyPilot records no exit code."""

    job_id: int
    job_name: str
    status: SkyJobStatus
    submitted_at: float | None
    start_at: float | None
    end_at: float | None


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def parse_version(stdout: str) -> str:
    """`sky --version` → "0.14.1"."""
    found = _VERSION.search(strip_ansi(stdout))
    if found is None:
        raise SkyMalformedOutput(f"sky --version printed no version: {_excerpt(stdout)}")
    return found.group(1)


def parse_job_id(stdout: str) -> int:
    """The job id `sky exec` (or `sky launch`) submitted."""
    found = _JOB_SUBMITTED.findall(strip_ansi(stdout))
    if len(found) != 1:
        raise SkyMalformedOutput(
            f"expected one 'Job submitted, ID: N' line, found {len(found)}: {_excerpt(stdout)}"
        )
    return int(found[0])


def terminated_clusters(stdout: str) -> list[str]:
    """Clusters a refresh found gone ("Cluster terminated on the cloud: NAME")."""
    return _TERMINATED.findall(strip_ansi(stdout))


def parse_status(stdout: str) -> list[ClusterRecord]:
    """`sky status -o json [--refresh] [NAMES]`. A name it does not know is simply absent."""
    data = _json_after(strip_ansi(stdout), "[")
    if not isinstance(data, list):
        raise SkyMalformedOutput(f"sky status: expected a JSON list: {_excerpt(stdout)}")
    return [_cluster(item, stdout) for item in data]


def parse_queue(stdout: str, cluster: str) -> list[QueueJob] | None:
    """`sky queue CLUSTER -o json`: the cluster's jobs, newest first, or None when SkyPilot
    printed `{}` (it could not ask: the cluster is unknown or its allocation is gone)."""
    data = _json_after(strip_ansi(stdout), "{")
    if not isinstance(data, dict):
        raise SkyMalformedOutput(f"sky queue: expected a JSON object: {_excerpt(stdout)}")
    if cluster not in data:
        if data:
            raise SkyMalformedOutput(f"sky queue: no entry for {cluster}: {_excerpt(stdout)}")
        return None
    jobs = data[cluster]
    if not isinstance(jobs, list):
        raise SkyMalformedOutput(f"sky queue: {cluster} is not a list: {_excerpt(stdout)}")
    return [_queue_job(item, stdout) for item in jobs]


def parse_logs_status(stdout: str) -> tuple[int, SkyJobStatus | None]:
    """`sky logs CLUSTER JOB --status` → (job id, status), None when SkyPilot knows no such job."""
    found = _LOGS_STATUS.search(strip_ansi(stdout))
    if found is None:
        raise SkyMalformedOutput(f"sky logs --status: no 'Job N: STATUS': {_excerpt(stdout)}")
    job_id, word = int(found.group(1)), found.group(2)
    if word == "None":
        return job_id, None
    try:
        return job_id, SkyJobStatus(word)
    except ValueError:
        raise SkyMalformedOutput(f"sky logs --status: unknown status {word!r}") from None


def exit_code_line(log_text: str) -> int | None:
    """The exit code the wrapper printed as its last line, if the log ends with one."""
    lines = [line for line in strip_ansi(log_text).splitlines() if line.strip()]
    for line in reversed(lines):
        found = _EXIT_LINE.fullmatch(line)
        if found is not None:
            return int(found.group(1))
        if not _is_sky_trailer(line):
            return None
    return None


def _is_sky_trailer(line: str) -> bool:
    """Lines SkyPilot (or srun) prints after the job's own output ends."""
    return line.startswith(("✓ Job finished", "srun: error:", "ERROR: Job ", "Job ")) or (
        "Shared connection" in line
    )


def allocation_ids(node_names: str | None) -> tuple[str, ...]:
    """Slurm job ids in SkyPilot's Slurm node names ("job107-node1,job107-node2" → ("107",))."""
    found: list[str] = []
    for name in (node_names or "").split(","):
        match = _NODE_NAME.match(name.strip())
        if match is not None and match.group(1) not in found:
            found.append(match.group(1))
    return tuple(found)


def _json_after(text: str, opener: str) -> Any:
    """The JSON value starting at the first line that starts with `opener` (SkyPilot prints
    notices before it on the same stream)."""
    for index, line in enumerate(text.splitlines(keepends=True)):
        if line.startswith(opener):
            rest = "".join(text.splitlines(keepends=True)[index:])
            try:
                value, _ = json.JSONDecoder().raw_decode(rest)
            except json.JSONDecodeError as exc:
                raise SkyMalformedOutput(f"invalid JSON ({exc.msg}): {_excerpt(text)}") from None
            return value
    raise SkyMalformedOutput(f"no JSON in the output: {_excerpt(text)}")


def _cluster(item: Any, stdout: str) -> ClusterRecord:
    try:
        return ClusterRecord(
            name=_text(item["name"]),
            status=ClusterStatus(item["status"]),
            cloud=_optional_text(item.get("cloud")),
            region=_optional_text(item.get("region")),
            nodes=int(item.get("nodes") or 0),
            cpus=_optional_text(item.get("cpus")),
            accelerators=_accelerators(item.get("accelerators")),
            resources=_text(item.get("resources_str_full") or item.get("resources_str") or ""),
            launched_at=int(item["launched_at"]) if item.get("launched_at") else None,
            allocation=allocation_ids(_optional_text(item.get("node_names"))),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise SkyMalformedOutput(
            f"sky status: unreadable cluster ({exc}): {_excerpt(stdout)}"
        ) from None


def _queue_job(item: Any, stdout: str) -> QueueJob:
    try:
        return QueueJob(
            job_id=int(item["job_id"]),
            job_name=_text(item.get("job_name") or ""),
            status=SkyJobStatus(item["status"]),
            submitted_at=_number(item.get("submitted_at")),
            start_at=_number(item.get("start_at")),
            end_at=_number(item.get("end_at")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise SkyMalformedOutput(f"sky queue: unreadable job ({exc}): {_excerpt(stdout)}") from None


def _accelerators(value: Any) -> str | None:
    if value is None or value == {}:
        return None
    if isinstance(value, dict):
        return ",".join(f"{name}:{count}" for name, count in sorted(value.items()))
    return str(value)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected text, got {type(value).__name__}")
    return value


def _optional_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _number(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {type(value).__name__}")
    return float(value)


def _excerpt(text: str, limit: int = 300) -> str:
    flat = " ".join(strip_ansi(text).split())
    return flat if len(flat) <= limit else flat[:limit] + "…"
