"""The durable record: schema migrations, the event codec and the Journal.

The public names load on first use: `journal show` reads the journal without importing
sqlite-utils, pydantic or the transitions machine (only writing, verifying and replaying need
them), and `benchmarks/bench_startup.py` checks that it stays so.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_PUBLIC = {
    "DEFAULT_PATH": "vibesys.journal_schema.opening",
    "ArtifactRow": "vibesys.journal_schema.progress",
    "ArtifactState": "vibesys.journal_schema.progress",
    "Attempt": "vibesys.journal_schema.records",
    "ClusterLease": "vibesys.journal_schema.clusters",
    "LIVE_LEASE_STATES": "vibesys.journal_schema.clusters",
    "LeaseState": "vibesys.journal_schema.clusters",
    "Settings": "vibesys.journal_schema.settings",
    "HistoryRow": "vibesys.journal_schema.records",
    "Invocation": "vibesys.journal_schema.records",
    "job_name": "vibesys.journal_schema.records",
    "Journal": "vibesys.journal_schema.store",
    "decode_event": "vibesys.journal_schema.codec",
    "encode_event": "vibesys.journal_schema.codec",
    "iso": "vibesys.journal_schema.clock",
    "journal_error": "vibesys.journal_schema.opening",
    "journal_path": "vibesys.journal_schema.opening",
    "lease_free": "vibesys.journal_schema.leases",
    "open_journal": "vibesys.journal_schema.store",
    "utc_now": "vibesys.journal_schema.clock",
    "verify_journal": "vibesys.journal_schema.verify",
}

if TYPE_CHECKING:
    from vibesys.journal_schema.clock import iso, utc_now
    from vibesys.journal_schema.clusters import LIVE_LEASE_STATES, ClusterLease, LeaseState
    from vibesys.journal_schema.codec import decode_event, encode_event
    from vibesys.journal_schema.leases import lease_free
    from vibesys.journal_schema.opening import DEFAULT_PATH, journal_error, journal_path
    from vibesys.journal_schema.progress import ArtifactRow, ArtifactState
    from vibesys.journal_schema.records import Attempt, HistoryRow, Invocation, job_name
    from vibesys.journal_schema.settings import Settings
    from vibesys.journal_schema.store import Journal, open_journal
    from vibesys.journal_schema.verify import verify_journal


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'vibesys.journal_schema' has no attribute {name!r}")


__all__ = [
    "DEFAULT_PATH",
    "LIVE_LEASE_STATES",
    "ArtifactRow",
    "ArtifactState",
    "Attempt",
    "ClusterLease",
    "HistoryRow",
    "Invocation",
    "Journal",
    "LeaseState",
    "Settings",
    "decode_event",
    "encode_event",
    "iso",
    "job_name",
    "journal_error",
    "journal_path",
    "lease_free",
    "open_journal",
    "utc_now",
    "verify_journal",
]
