"""Events to and from the journal: the class name in `event`, the payload as JSON in `evidence`.

Encoding runs on every commit and reads the fields directly; decoding validates the payload
with pydantic, imported then (only `journal verify` and replays decode)."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from vibesys.errors import NotAJournal
from vibesys.states import EVENT_TYPES, Event

if TYPE_CHECKING:
    from pydantic import TypeAdapter

_BY_NAME: dict[str, type[Event]] = {cls.__name__: cls for cls in EVENT_TYPES}
#: Each event class's field names, sorted: the JSON keys, in the order `sort_keys` gives.
_FIELDS: dict[type[Event], tuple[str, ...]] = {
    cls: tuple(sorted(f.name for f in dataclasses.fields(cls))) for cls in EVENT_TYPES
}
_ENCODE = json.JSONEncoder(sort_keys=True).encode

_ADAPTERS: dict[str, TypeAdapter[Any]] = {}


def _adapter(cls: type[Event]) -> TypeAdapter[Any]:
    if cls.__name__ not in _ADAPTERS:
        from pydantic import TypeAdapter

        _ADAPTERS[cls.__name__] = TypeAdapter(cls)
    return _ADAPTERS[cls.__name__]


def event_payload(event: Event) -> dict[str, Any]:
    # Events hold only scalars: a shallow read of the fields is all asdict() would do, minus
    # its deep copies (this runs on every commit).
    return {name: getattr(event, name) for name in _FIELDS[type(event)]}


def encode_event(event: Event) -> tuple[str, str]:
    return type(event).__name__, _ENCODE(event_payload(event))


def decode_event(kind: str, evidence: str) -> Event:
    from pydantic import ValidationError

    cls = _BY_NAME.get(kind)
    if cls is None:
        raise NotAJournal(f"history names an unknown event {kind!r}")
    try:
        event: Event = _adapter(cls).validate_python(json.loads(evidence))
    except (ValidationError, json.JSONDecodeError) as exc:
        raise NotAJournal(f"evidence of a {kind} event does not decode: {exc}") from exc
    return event
