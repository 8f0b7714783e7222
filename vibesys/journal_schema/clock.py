"""Times as the journal stores them (ISO-8601 UTC with microseconds) and reads them back
(aware datetimes: every read model carries datetimes, never the text)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

#: The text of the current second (as `iso` writes it, up to the seconds) and the second.
_second: tuple[int, str] = (-1, "")


def utc_now() -> datetime:
    return datetime.now(UTC)


def now_iso() -> str:
    """`iso(utc_now())`, for every commit. The text up to the second is made once a second:
    making a datetime and its ISO text costs three times what the rest does."""
    global _second
    micros = time.time_ns() // 1000
    second, fraction = divmod(micros, 1_000_000)
    cached, text = _second  # one tuple, replaced whole: threads never see half of one
    if cached != second:
        text = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        _second = (second, text)
    return f"{text}.{fraction:06d}+00:00"


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def iso_or_none(moment: datetime | None) -> str | None:
    return None if moment is None else iso(moment)


def moment(text: str) -> datetime:
    """A time the journal stored, read back: aware (a zone-less one is UTC, as written)."""
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def moment_or_none(text: str | None) -> datetime | None:
    return None if not text else moment(text)
