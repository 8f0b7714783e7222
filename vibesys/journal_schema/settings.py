"""How an invocation is carried on, recorded with it at PREPARED (`invocations.settings`, m006).

Whoever carries the invocation on after the process that started it (`wait`, `reconcile`, a
takeover, the GPU broker) reads these values from the journal; none falls back to defaults of
its own. The retry budget itself is `invocations.max_retries`.

A frozen model decoded strictly once when a row is read, with no pydantic: `journal show` reads
rows without importing it. Every key must be there with exactly its type; anything else is a
damaged row, named by key.
"""

from __future__ import annotations

import json
import math
from typing import Any, Final

from msgspec import Struct, structs

from vibesys.errors import JournalCorrupt

__all__ = ["Settings", "SettingsError"]


class SettingsError(JournalCorrupt):
    """A settings record that is not one (a key missing, unknown, or of the wrong type)."""


class Settings(Struct, frozen=True):
    #: seconds before the first retry after an infrastructure failure; doubles (`retry_backoff`)
    retry_delay_seconds: float = 2.0
    retry_backoff: float = 2.0
    retry_max_delay_seconds: float = 300.0
    #: how long a job's scheduler may stay unreachable, counted from the first unreachable
    #: observation recorded for the attempt, before its outcome is called unknown; also how
    #: long `run` and `wait` keep driving an outcome that stays open
    unreachable_timeout_seconds: float = 600.0
    #: the job serves a client that is gone once its driver is (the GPU broker's jobs):
    #: `reconcile` cancels it instead of following it to its end
    cancel_when_orphaned: bool = False

    def __post_init__(self) -> None:
        for name in _NUMBERS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise SettingsError(f"settings: {name} must be a number, not {value!r}")
            if not math.isfinite(value) or value < 0:
                raise SettingsError(f"settings: {name} must be finite and >= 0, not {value!r}")
        if self.retry_backoff < 1:
            raise SettingsError(f"settings: retry_backoff must be >= 1, not {self.retry_backoff}")
        if not isinstance(self.cancel_when_orphaned, bool):
            raise SettingsError(
                f"settings: cancel_when_orphaned must be true or false, "
                f"not {self.cancel_when_orphaned!r}"
            )

    def to_json(self) -> dict[str, Any]:
        return structs.asdict(self)

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)

    @classmethod
    def loads(cls, text: str | None) -> Settings:
        """The settings a row holds; SettingsError naming the key when it holds none."""
        if text is None:
            raise SettingsError("settings: the invocation has no recorded settings")
        try:
            data = json.loads(text)
        except ValueError:
            raise SettingsError(f"settings: not JSON: {text[:80]!r}") from None
        if not isinstance(data, dict):
            raise SettingsError(f"settings: not a JSON object: {text[:80]!r}")
        return cls.from_json(data)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Settings:
        unknown = sorted(set(data) - _KEYS)
        if unknown:
            raise SettingsError(f"settings: unknown key {unknown[0]!r}")
        missing = [key for key in _ORDER if key not in data]
        if missing:
            raise SettingsError(f"settings: {missing[0]} is missing")
        return cls(**data)


_ORDER: Final = Settings.__struct_fields__
_KEYS: Final = frozenset(_ORDER)
_NUMBERS: Final = tuple(name for name in _ORDER if name != "cancel_when_orphaned")
