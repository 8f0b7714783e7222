"""The durable record: schema migrations, the event codec and the Journal."""

from vibesys.journal_schema.codec import decode_event, encode_event
from vibesys.journal_schema.records import Attempt, HistoryRow, Invocation
from vibesys.journal_schema.store import (
    DEFAULT_PATH,
    Journal,
    iso,
    journal_path,
    lease_free,
    open_journal,
    utc_now,
)
from vibesys.journal_schema.verify import verify_journal

__all__ = [
    "DEFAULT_PATH",
    "Attempt",
    "HistoryRow",
    "Invocation",
    "Journal",
    "decode_event",
    "encode_event",
    "iso",
    "journal_path",
    "lease_free",
    "open_journal",
    "utc_now",
    "verify_journal",
]
