"""Times as the journal stores them: ISO-8601 UTC with microseconds."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> datetime:
    return datetime.now(UTC)


def now_iso() -> str:
    """`iso(utc_now())` without the conversion that a moment already in UTC does not need (it
    runs on every commit)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds")
