"""The broker's replies to `vibesys-gpu` (pure): typed values, encoded as JSON lines.

See `vibesys.broker.protocol` for the whole conversation. Output and capture bytes travel as
base64: a command's output is bytes, not text.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, Final, Literal

import msgspec

from vibesys.service.framing import ProtocolError, encode_line, expect_int, json_object

__all__ = [
    "MAX_REPLY_BYTES",
    "Capture",
    "Captured",
    "Exit",
    "Output",
    "Refused",
    "Reply",
    "Waiting",
    "decode_reply",
    "encode_reply",
    "waiting_line",
]

PROTOCOL_VERSION: Final = 1
#: Output is sent in chunks well below this (base64 grows them by a third).
MAX_REPLY_BYTES: Final = 1 << 20
_CAPTURE_NAME = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]{0,254}")

Stream = Literal["stdout", "stderr"]


class Output(msgspec.Struct, frozen=True):
    stream: Stream
    data: bytes


class Waiting(msgspec.Struct, frozen=True):
    """The command waits for a free slot under `max_concurrent_jobs`."""

    active: int
    cap: int
    ahead: int


class Exit(msgspec.Struct, frozen=True):
    status: int


class Refused(msgspec.Struct, frozen=True):
    message: str


class Capture(msgspec.Struct, frozen=True):  # the next bytes of a capture file
    name: str
    data: bytes


class Captured(msgspec.Struct, frozen=True):
    """A capture file is complete: the client checks what it wrote against these."""

    name: str
    size: int
    sha256: str


Reply = Output | Waiting | Exit | Refused | Capture | Captured


def waiting_line(waiting: Waiting) -> str:
    jobs = "job is" if waiting.active == 1 else "jobs are"
    return (
        f"[vibesys-gpu] waiting: {waiting.active} of this run's GPU {jobs} active "
        f"(cap {waiting.cap}), {waiting.ahead} queued ahead"
    )


def encode_reply(reply: Reply) -> bytes:
    body: dict[str, Any]
    match reply:
        case Output(stream, data):
            body = {"type": "output", "stream": stream, "data": base64.b64encode(data).decode()}
        case Waiting(active, cap, ahead):
            message = waiting_line(reply)
            body = {"type": "waiting", "active": active, "cap": cap, "ahead": ahead}
            body["message"] = message
        case Exit(status):
            body = {"type": "exit", "status": status}
        case Refused(message):
            body = {"type": "refused", "message": message}
        case Capture(name, data):
            body = {"type": "capture", "name": name, "data": base64.b64encode(data).decode()}
        case Captured(name, size, sha256):
            body = {"type": "captured", "name": name, "size": size, "sha256": sha256}
    return encode_line({"version": PROTOCOL_VERSION, **body})


def decode_reply(line: bytes) -> Reply:
    data = json_object(line)
    if data.get("version") != PROTOCOL_VERSION:
        raise ProtocolError(f"reply: unsupported protocol version {data.get('version')!r}")
    kind = data.get("type")
    try:
        if kind == "output" and data["stream"] in ("stdout", "stderr"):
            return Output(data["stream"], base64.b64decode(data["data"], validate=True))
        if kind == "waiting":
            return Waiting(
                expect_int(data["active"]), expect_int(data["cap"]), expect_int(data["ahead"])
            )
        if kind == "exit":
            return Exit(expect_int(data["status"]))
        if kind == "refused" and isinstance(data["message"], str):
            return Refused(data["message"])
        if kind == "capture" and _CAPTURE_NAME.fullmatch(data["name"]):
            return Capture(data["name"], base64.b64decode(data["data"], validate=True))
        if kind == "captured" and _CAPTURE_NAME.fullmatch(data["name"]):
            return Captured(data["name"], expect_int(data["size"]), str(data["sha256"]))
    except (KeyError, TypeError, binascii.Error) as exc:
        raise ProtocolError(f"reply: malformed {kind} message") from exc
    raise ProtocolError(f"reply: unknown message type {kind!r}")
