"""The durable record: schema migrations, the event codec and the Journal."""

from __future__ import annotations

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
