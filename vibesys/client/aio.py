"""`vibesys.AsyncClient`: `Client` for asyncio. Its own module, so that the CLI, built on
`Client`, does not load asyncio (a tenth of `vibesys run`'s start-up)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from vibesys.client.client import Client
from vibesys.client.handle import Handle
from vibesys.job_result import JobResult

__all__ = ["AsyncClient"]


class AsyncClient:
    """`Client` for asyncio: each call runs on a worker thread (`asyncio.to_thread`); the
    handles are the same (`await client.result(handle)`)."""

    def __init__(self, journal: str | os.PathLike[str] | None = None) -> None:
        self.client = Client(journal)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def submit(self, argv: Sequence[str], **kwargs: Any) -> Handle:
        return await asyncio.to_thread(self.client.submit, argv, **kwargs)

    async def attach(self, key_or_id: str) -> Handle:
        return await asyncio.to_thread(self.client.attach, key_or_id)

    async def result(self, handle: Handle, timeout: float | None = None) -> JobResult:
        """`handle.result(timeout)` on a worker thread."""
        return await asyncio.to_thread(handle.result, timeout)

    async def close(self) -> None:
        await asyncio.to_thread(self.client.close)
