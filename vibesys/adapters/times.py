"""Times a scheduler reports (sacct's Start and End, a claim's `started_at`), read once where
its text is parsed. The journal's own times are read by `vibesys.journal_schema.clock`."""

from __future__ import annotations

from datetime import datetime

#: What sacct prints for a time it does not have.
_NONE = frozenset({"", "Unknown", "None"})


def reported_time(text: str | None) -> datetime | None:
    """`text` as a datetime, or None when it says there is none or is not a time. One without
    a zone stays naive: Slurm prints this host's local time, and its reader says so."""
    if text is None or text in _NONE:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None
