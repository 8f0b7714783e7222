"""A job's files where it ran, read through a transport's runner: a log from a byte offset, the
declared artifacts (listed with sizes and digests where the job ran), one artifact's bytes.
Shared by the adapters whose jobs write to remote attempt directories (Slurm, SkyPilot)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import PurePosixPath
from typing import Final

from vibesys.adapters.base import ArtifactInfo, Sink
from vibesys.adapters.rundir.listing import DEFAULT_LIMITS, LIST_SCRIPT, list_argv, parse_listing
from vibesys.adapters.transports import Runner
from vibesys.errors import BackendUnavailable
from vibesys.osutil.artifact_walk import Limits

#: A log not written yet reads as empty; `tail -c +N` counts from 1.
READ_FROM: Final = 'test -e "$1" || exit 0; exec tail -c +"$2" "$1"'


class CountingSink:
    """A sink that counts what passes through it."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.count = 0

    def write(self, data: bytes, /) -> object:
        self.count += len(data)
        return self.sink.write(data)

    def flush(self) -> None:
        self.sink.flush()


def read_from(runner: Runner, path: str, offset: int, sink: Sink) -> int:
    """The bytes of `path` from `offset` on, into `sink`; how many there were."""
    counter = CountingSink(sink)
    result = runner.stream(
        ["sh", "-c", READ_FROM, "vibesys-log", path, str(offset + 1)], counter, timeout=None
    )
    if result.returncode != 0:
        raise BackendUnavailable(f"reading {path} failed", evidence=result.evidence())
    return counter.count


def list_artifacts_in(
    checked: Callable[[list[str]], str],
    work_dir: PurePosixPath,
    patterns: Sequence[str],
    limits: Limits = DEFAULT_LIMITS,
) -> tuple[list[ArtifactInfo], list[str]]:
    """The files matching `patterns` under `work_dir`, listed where they are, and the patterns
    that matched nothing. `checked` runs a command and returns its output (or raises)."""
    out = checked(["python3", "-c", LIST_SCRIPT, *list_argv(str(work_dir), patterns, limits)])
    return parse_listing(out)


def fetch_file(runner: Runner, path: str, sink: Sink) -> None:
    """The whole of `path`, into `sink`."""
    result = runner.stream(["cat", path], sink)
    if result.returncode != 0:
        raise BackendUnavailable(f"downloading {path} failed", evidence=result.evidence())
