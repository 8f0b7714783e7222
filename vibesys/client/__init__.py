"""The Python API: `Client.submit` returns a `Handle` (status, result, cancel, logs); an
idempotency key makes a submission exactly once across processes and crashes. See
docs/api.md. `AsyncClient`, for asyncio, is `vibesys.client.aio`'s (the CLI loads no asyncio)."""

from vibesys.client.client import Client
from vibesys.client.handle import Handle, Status
from vibesys.invocation.keys import KeyConflict, Recording, RequestRow
from vibesys.job_result import JobResult, JobStatus, NotEnded

__all__ = [
    "Client",
    "Handle",
    "JobResult",
    "JobStatus",
    "KeyConflict",
    "NotEnded",
    "Recording",
    "RequestRow",
    "Status",
]
