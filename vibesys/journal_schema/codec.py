"""Events to and from the journal: the class name in `event`, the payload as JSON in `evidence`."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from pydantic import TypeAdapter, ValidationError

from vibesys.errors import NotAJournal
from vibesys.states import EVENT_TYPES, Event

_BY_NAME: dict[str, type[Event]] = {cls.__name__: cls for cls in EVENT_TYPES}


_ADAPTERS: dict[str, TypeAdapter[Any]] = {}


def _adapter(cls: type[Event]) -> TypeAdapter[Any]:
    if cls.__name__ not in _ADAPTERS:
        _ADAPTERS[cls.__name__] = TypeAdapter(cls)
    return _ADAPTERS[cls.__name__]


def event_payload(event: Event) -> dict[str, Any]:
    # Events hold only scalars: a shallow read of the fields is all asdict() would do, minus
    # its deep copies (this runs on every commit).
    return {f.name: getattr(event, f.name) for f in dataclasses.fields(event)}


def encode_event(event: Event) -> tuple[str, str]:
    return type(event).__name__, json.dumps(event_payload(event), sort_keys=True)


def decode_event(kind: str, evidence: str) -> Event:
    cls = _BY_NAME.get(kind)
    if cls is None:
        raise NotAJournal(f"history names an unknown event {kind!r}")
    try:
        event: Event = _adapter(cls).validate_python(json.loads(evidence))
    except (ValidationError, json.JSONDecodeError) as exc:
        raise NotAJournal(f"evidence of a {kind} event does not decode: {exc}") from exc
    return event
