"""Decoding a recorded or given value into a msgspec Struct strictly, and naming what does not
fit in one line ("key.path: why"), as the command line and the journal report it.

A check a Struct makes in `__post_init__` raises ValueError("FIELD: why"), so the field it
names joins the path msgspec reports (`$.outer[0]`) the same way a type error's does.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

__all__ = ["decode", "where_and_why"]

T = TypeVar("T")

_AT = re.compile(r"(?P<why>.*?)(?: - at `\$(?P<path>[^`]*)`)?", re.DOTALL)
_UNKNOWN = re.compile(r"Object contains unknown field `(?P<name>.+)`")
_MISSING = re.compile(r"Object missing required field `(?P<name>.+)`")
_NAMED = re.compile(r"(?P<name>[a-z_]+): (?P<why>.*)", re.DOTALL)


def decode(data: Any, kind: type[T]) -> T:
    """`data` (JSON-shaped: dicts, lists, str, numbers, or Structs already made) as `kind`,
    strictly: no coercion, no unknown keys where `kind` forbids them. msgspec.ValidationError
    (a ValueError) otherwise; `where_and_why` renders it."""
    return msgspec.convert(data, kind, strict=True)


def where_and_why(exc: Exception) -> tuple[str, str]:
    """The dotted key path (items by index, "" for the whole value) and the reason of a
    decoding error."""
    found = _AT.fullmatch(str(exc))
    why, path = (found["why"], found["path"] or "") if found else (str(exc), "")
    parts = [part for part in re.split(r"[.\[\]]+", path) if part]
    for pattern, reason in ((_UNKNOWN, "Extra inputs are not permitted"), (_MISSING, None)):
        named = pattern.fullmatch(why)
        if named:
            return ".".join([*parts, named["name"]]), reason or "Field required"
    named = _NAMED.fullmatch(why)
    if named:
        parts.append(named["name"])
        why = named["why"]
    return ".".join(parts), why
