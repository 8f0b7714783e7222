"""vibesys: durable, explicit state machines for remote evaluation jobs.

The public names are loaded on first use, from the one table below: every `vibesys` command
imports this package first, and importing them all here would load the engine, the client,
the session, the adapters' base, pydantic and asyncio (636 modules, about a quarter of a
second) into `--help` and the read-only commands, which must load no adapter.
"""

from __future__ import annotations

import importlib

#: `typing.TYPE_CHECKING`, without importing typing: until `vibesys.cli.main` sets SIGINT's
#: handler, every import widens the moment a Ctrl-C would end `vibesys` with a traceback.
TYPE_CHECKING = False

__version__ = "0.1.0"

_PUBLIC = {
    "Client": "vibesys.client",
    "AsyncClient": "vibesys.client.aio",
    "Handle": "vibesys.client",
    "KeyConflict": "vibesys.client",
    "Engine": "vibesys.engine",
    "DriveOptions": "vibesys.engine",
    "RetryPolicy": "vibesys.engine",
    "drive": "vibesys.engine",
    "reconcile": "vibesys.engine",
    "wait_for": "vibesys.engine",
    "open_journal": "vibesys.journal_schema",
    "journal_path": "vibesys.journal_schema",
    "Journal": "vibesys.journal_schema",
    "JobState": "vibesys.states",
    "Outcome": "vibesys.states",
    "FailureClass": "vibesys.states",
    "replay": "vibesys.states",
    "register": "vibesys.adapters.registry",
    "AdapterEntry": "vibesys.adapters.registry",
    "FakeBackend": "vibesys.adapters.fake",
    "FakeAttempt": "vibesys.adapters.fake",
    "VibesysError": "vibesys.errors",
    "JobResult": "vibesys.job_result",
    "JobStatus": "vibesys.job_result",
    "result": "vibesys.job_result",
    "Session": "vibesys.session",
}

if TYPE_CHECKING:
    from typing import Any

    from vibesys.adapters.fake import FakeAttempt, FakeBackend
    from vibesys.adapters.registry import AdapterEntry, register
    from vibesys.client import Client, Handle, KeyConflict
    from vibesys.client.aio import AsyncClient
    from vibesys.engine import DriveOptions, Engine, RetryPolicy, drive, reconcile, wait_for
    from vibesys.errors import VibesysError
    from vibesys.job_result import JobResult, JobStatus, result
    from vibesys.journal_schema import Journal, journal_path, open_journal
    from vibesys.session import Session
    from vibesys.states import FailureClass, JobState, Outcome, replay


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'vibesys' has no attribute {name!r}")


__all__ = [
    "AdapterEntry",
    "AsyncClient",
    "Client",
    "DriveOptions",
    "Engine",
    "FailureClass",
    "FakeAttempt",
    "FakeBackend",
    "Handle",
    "JobResult",
    "JobState",
    "JobStatus",
    "Journal",
    "KeyConflict",
    "Outcome",
    "RetryPolicy",
    "Session",
    "VibesysError",
    "__version__",
    "drive",
    "journal_path",
    "open_journal",
    "reconcile",
    "register",
    "replay",
    "result",
    "wait_for",
]
