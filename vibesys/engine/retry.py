"""Retry policy and backoff: pure arithmetic, no sleeping."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from msgspec import Struct

if TYPE_CHECKING:
    from vibesys.journal_schema.settings import Settings


class RetryPolicy(Struct, frozen=True):
    """Only infrastructure failures are retried, at most `max_retries` times."""

    max_retries: int = 2
    initial_delay_seconds: float = 2.0
    backoff: float = 2.0
    max_delay_seconds: float = 300.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.initial_delay_seconds < 0 or self.max_delay_seconds < 0:
            raise ValueError("retry delays must be >= 0")
        if self.backoff < 1:
            raise ValueError("backoff must be >= 1")


def retry_delay(retry_number: int, policy: RetryPolicy) -> float:
    """Seconds to wait before retry number `retry_number` (1-based)."""
    delay = policy.initial_delay_seconds * policy.backoff ** max(retry_number - 1, 0)
    return min(delay, policy.max_delay_seconds)


def next_attempt_at(retry_number: int, policy: RetryPolicy, now: datetime) -> datetime:
    return now + timedelta(seconds=retry_delay(retry_number, policy))


def policy_of(max_retries: int, settings: Settings) -> RetryPolicy:
    """The retry policy recorded with an invocation (its budget and its settings)."""
    return RetryPolicy(
        max_retries,
        settings.retry_delay_seconds,
        settings.retry_backoff,
        settings.retry_max_delay_seconds,
    )
