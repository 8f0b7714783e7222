"""The framing of every socket service: one JSON object per line, pure (sans-I/O).

A line is bounded in length before its newline arrives (`LineDecoder`), its integers in
digits, its nesting by the parser; a refusal never echoes a peer's odd field name (it could be
a secret pasted in the wrong place).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "MAX_INTEGER_DIGITS",
    "LineDecoder",
    "LineTooLong",
    "ProtocolError",
    "Refusal",
    "encode_line",
    "expect_int",
    "field_label",
    "json_object",
    "shown_field",
]

#: The longest integer a message may carry (every bound is far below; a longer one costs
#: quadratic time to convert).
MAX_INTEGER_DIGITS: Final = 30

_FIELD_NAME = re.compile(r"[a-z_]{1,40}")


class ProtocolError(ValueError):
    """A line that is not a valid message; the text says why, for the peer to read, and
    `field` names the field at fault when a refusal should (None: the line as a whole)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class Refusal(Exception):
    """A well-formed request the service will not serve; the message is for the peer, `field`
    names the request's field at fault (None: the request as a whole, or the connection)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class LineTooLong(ProtocolError):
    """A line grew past the limit before its newline arrived."""


class LineDecoder:
    """Splits a byte stream into lines of at most `limit` bytes (newline excluded).

    `feed` returns the complete lines received so far. A line longer than the limit raises
    LineTooLong as soon as the limit is passed (the peer is not allowed to make us buffer an
    unbounded amount), and the decoder stays broken afterwards.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._buffer = bytearray()
        self._broken = False

    def feed(self, data: bytes) -> list[bytes]:
        if self._broken:
            raise LineTooLong(f"line exceeds {self._limit} bytes")
        self._buffer += data
        lines: list[bytes] = []
        while (end := self._buffer.find(b"\n")) >= 0:
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            self._check(len(line))
            lines.append(line)
        self._check(len(self._buffer))
        return lines

    def pending(self) -> bytes:
        """Bytes received after the last newline (a truncated line at EOF)."""
        return bytes(self._buffer)

    def _check(self, size: int) -> None:
        if size > self._limit:
            self._broken = True
            self._buffer.clear()
            raise LineTooLong(f"line exceeds {self._limit} bytes")


def shown_field(name: str) -> str | None:
    """A field name as a refusal may repeat it, or None: a peer's odd key (which could be a
    secret pasted in the wrong place) is never echoed back."""
    return name if _FIELD_NAME.fullmatch(name) else None


def field_label(name: str) -> str:
    shown = shown_field(name)
    return "(a field that is not a lowercase name)" if shown is None else repr(shown)


def expect_int(value: Any) -> int:
    """`value` if it is a JSON integer (not a bool); TypeError otherwise."""
    if type(value) is not int:
        raise TypeError(value)
    return value


def json_object(line: bytes) -> dict[str, Any]:
    """The JSON object on one line (without its newline), or ProtocolError saying why not."""
    try:
        data = json.loads(line.decode("utf-8"), parse_int=_integer, parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise ProtocolError("malformed message: not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"malformed message: not JSON ({exc.msg})") from None
    except RecursionError:
        raise ProtocolError("malformed message: nested too deeply") from None
    if not isinstance(data, dict):
        raise ProtocolError("malformed message: not a JSON object")
    return data


def encode_line(body: Mapping[str, Any]) -> bytes:
    """`body` as one compact ASCII JSON line, newline included."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=True).encode("ascii") + b"\n"


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise ProtocolError(
            f"malformed message: an integer of more than {MAX_INTEGER_DIGITS} digits"
        )
    return int(text)


def _no_constant(text: str) -> None:
    raise ProtocolError(f"malformed message: {text} is not JSON")
