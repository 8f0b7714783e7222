"""Events to and from the journal: the class name in `event`, the payload as JSON in `evidence`;
and other records of plain fields the same way (a shared round's observations, `encode_record`).

Encoding runs on every commit and reads the fields directly; decoding validates the payload
strictly against the record's type (msgspec: every field's type, enumerations too)."""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import msgspec

from vibesys.errors import NotAJournal
from vibesys.journal_schema.clock import iso
from vibesys.states import EVENT_TYPES, Event

_BY_NAME: dict[str, type[Event]] = {cls.__name__: cls for cls in EVENT_TYPES}
#: Each event class's field names, sorted: the JSON keys, in the order `sort_keys` gives.
_FIELDS: dict[type[Event], tuple[str, ...]] = {
    cls: tuple(sorted(cls.__struct_fields__)) for cls in EVENT_TYPES
}


def _json_encoder() -> Callable[[dict[str, Any]], str]:
    """`json.dumps(payload, sort_keys=True)`, minus the C encoder that every `dumps` builds
    anew (most of its cost on a payload this small): one is built here and kept. Without the
    C accelerator (another Python), the standard encoder does the same work."""
    standard = json.JSONEncoder(sort_keys=True)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return standard.encode
    encode = make(
        None,  # no circular check: payloads are flat dicts of scalars
        standard.default,
        json.encoder.encode_basestring_ascii,
        None,
        standard.key_separator,
        standard.item_separator,
        True,  # sort_keys
        False,  # skipkeys
        True,  # allow_nan
    )
    return lambda payload: "".join(encode(payload, 0))


_ENCODE = _json_encoder()

T = TypeVar("T")


def event_payload(event: Event) -> dict[str, Any]:
    # Events hold only scalars: a shallow read of the fields is all asdict() would do, minus
    # its deep copies (this runs on every commit).
    return {name: getattr(event, name) for name in _FIELDS[type(event)]}


def encode_event(event: Event) -> tuple[str, str]:
    return type(event).__name__, _ENCODE(event_payload(event))


def decode_event(kind: str, evidence: str) -> Event:
    cls = _BY_NAME.get(kind)
    if cls is None:
        raise NotAJournal(f"history names an unknown event {kind!r}")
    try:
        event: Event = msgspec.json.decode(evidence, type=cls)
    except msgspec.DecodeError as exc:
        raise NotAJournal(f"evidence of a {kind} event does not decode: {exc}") from exc
    return event


def encode_record(record: Any) -> str:
    """A record (a msgspec Struct) of plain fields as JSON, keys sorted, as events are:
    enumerations by their value, times in the journal's ISO form."""
    payload = {}
    for name in record.__struct_fields__:
        value = getattr(record, name)
        payload[name] = iso(value) if isinstance(value, datetime) else value
    return _ENCODE(payload)


def decode_record(cls: type[T], text: str) -> T:
    """`encode_record`'s text as a `cls`, validated (every field's type, enumerations too)."""
    try:
        record: T = msgspec.json.decode(text, type=cls)
    except msgspec.DecodeError as exc:
        raise NotAJournal(f"a recorded {cls.__name__} does not decode: {exc}") from exc
    return record
