"""What every strict site-configuration model shares: the pydantic config and the tuple type."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field

#: Strict: TOML already carries types, so a string where a number belongs is a mistake to
#: report, not a value to coerce. Frozen: a loaded config cannot be mutated.
STRICT = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)

#: TOML arrays arrive as lists; lax mode for the container only (items stay strict).
StrTuple = Annotated[tuple[str, ...], Field(strict=False)]
