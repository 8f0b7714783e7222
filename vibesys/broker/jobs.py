"""What the broker hands to the engine side, and what it expects back (pure types).

The server never touches the engine: it drives a `GpuJobRunner`, and `engine_runner` is the
one module implementing it with the engine. A runner is given a job that was already accepted
(token, workspace, limits, environment all checked) and a slot under the run's concurrency cap.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, Protocol

import msgspec

from vibesys.osutil.sandbox import Sandbox

__all__ = ["GpuJob", "GpuJobRunner", "OutputSink", "SlotBinding", "StopSignal"]

Stream = Literal["stdout", "stderr"]


class SlotBinding(Protocol):
    """The run slot a job holds: told which invocation it runs once that is recorded."""

    def bind(self, invocation_id: str) -> None: ...


class GpuJob(msgspec.Struct, frozen=True):
    """An accepted GPU command: run `argv` confined by `sandbox` as one Slurm job."""

    argv: tuple[str, ...]
    sandbox: Sandbox
    gpus: int
    time_minutes: int
    #: candidate partitions in preference order (the srun adapter picks one by sinfo limits)
    partitions: tuple[str, ...]
    #: the job is named `<job_name_prefix>-<invocation>-<attempt>`
    job_name_prefix: str
    #: the slot it holds under the run's cap (set by the server once it has one)
    slot: SlotBinding | None = None
    #: cancelled this many seconds after its submission, exactly (None: its time limit only)
    timeout_seconds: int | None = None
    #: the operator's profiler it runs under, by name (None: no profile)
    profiler: str | None = None
    #: the profiler's capture files (globs in the job's working directory), sent back verified
    captures: tuple[str, ...] = ()

    @property
    def cwd(self) -> str:
        return self.sandbox.cwd

    @property
    def env(self) -> Mapping[str, str]:
        return self.sandbox.env


class OutputSink(Protocol):
    """Where the job's output goes, as it is produced. Never raises: a sink whose reader is
    gone drops the bytes (and the server stops the job)."""

    def write(self, stream: Stream, data: bytes) -> None: ...

    def capture(self, name: str, data: bytes) -> None:
        """The next bytes of the capture file `name`."""
        ...

    def captured(self, name: str, size: int, sha256: str) -> None:
        """The capture file `name` is complete: what the client wrote must match."""
        ...


class StopSignal(Protocol):
    """Set when the client went away (or the broker shuts down)."""

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class GpuJobRunner(Protocol):
    def run(self, job: GpuJob, output: OutputSink, stop: StopSignal) -> int:
        """Run `job` to its end and return the exit status for the client: the command's own
        (128+N for signal N), 2 when the scheduler refused it (the reason written to stderr),
        130 when it was stopped. Once `stop` is set, cancel the job, wait until the
        scheduler confirms it is gone, and return."""
        ...
