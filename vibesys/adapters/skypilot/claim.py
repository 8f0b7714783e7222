"""Claims of fenced attempts: the parsed content of a run directory's `claim` file.

This adapter's local copy until the shared `vibesys.adapters.claim` (issue 8) lands; the format
is the protocol's: `key=value` lines, the first `kind=job` (written by the wrapper before the
command runs) or `kind=fence` (written by the engine to retire an ambiguous attempt).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["Claim", "parse_claim"]


@dataclass(frozen=True, slots=True)
class Claim:
    kind: str
    fields: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    raw: str = ""

    @property
    def is_job(self) -> bool:
        return self.kind == "job"

    @property
    def is_fence(self) -> bool:
        return self.kind == "fence"

    def get(self, key: str) -> str | None:
        value = self.fields.get(key)
        return value or None


def parse_claim(text: str) -> Claim | None:
    """The claim in `text`, or None when it is not one (empty, or no `kind=` first line)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not lines[0].startswith("kind="):
        return None
    values: dict[str, str] = {}
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and key and key not in values:
            values[key.strip()] = value.strip()
    return Claim(values["kind"], MappingProxyType(values), text)
