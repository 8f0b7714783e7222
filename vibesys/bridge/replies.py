"""The bridge's replies to `vibesys-eval` (pure): typed values, encoded as JSON lines.

See `vibesys.bridge.protocol` for the whole conversation; output bytes travel as base64 with
their offset in the attempt's log, and a result carries the JobResult's JSON object.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from vibesys.bridge.protocol import PROTOCOL_VERSION
from vibesys.service.framing import ProtocolError, encode_line, json_object

__all__ = [
    "Accepted",
    "Busy",
    "Cancelling",
    "Capabilities",
    "Heartbeat",
    "Output",
    "Queued",
    "Refused",
    "Reply",
    "Result",
    "Started",
    "Stopping",
    "decode_reply",
    "encode_reply",
]

Stream = Literal["stdout", "stderr"]


class Accepted(msgspec.Struct, frozen=True):
    invocation: str
    request_id: str
    reattached: bool
    #: a heartbeat comes at least this often while nothing else does (the helper's clock)
    heartbeat_seconds: float = 5.0


class Heartbeat(msgspec.Struct, frozen=True):
    """Nothing new, but the bridge is there and follows the evaluation."""


class Busy(msgspec.Struct, frozen=True):
    """Every connection the bridge serves at once (or this uid's share) is taken: try again
    after `retry_after` seconds. Not a refusal: nothing of the request was read."""

    message: str
    retry_after: float


class Queued(msgspec.Struct, frozen=True):
    """Not started yet; `position` evaluations of the campaign are ahead (0: none)."""

    position: int
    message: str = ""


class Started(msgspec.Struct, frozen=True):
    attempt: int
    cluster: str | None
    job_id: str | None


class Output(msgspec.Struct, frozen=True):
    attempt: int
    stream: Stream
    offset: int
    data: bytes


class Result(msgspec.Struct, frozen=True):
    """The JobResult (its JSON object), and the exit status the helper gives for it."""

    result: Mapping[str, Any]
    exit_status: int


class Stopping(msgspec.Struct, frozen=True):
    message: str


class Cancelling(msgspec.Struct, frozen=True):
    message: str


class Capabilities(msgspec.Struct, frozen=True):
    capabilities: Mapping[str, Any]
    #: the agent's runtime notes (Markdown), sent when the session rendered them
    notes: str | None = None


class Refused(msgspec.Struct, frozen=True):
    message: str
    field: str | None = None


Reply = (
    Accepted
    | Queued
    | Started
    | Output
    | Result
    | Stopping
    | Cancelling
    | Capabilities
    | Refused
    | Heartbeat
    | Busy
)


def encode_reply(reply: Reply) -> bytes:
    body: dict[str, Any]
    match reply:
        case Accepted(invocation, request_id, reattached, heartbeat):
            body = {"type": "accepted", "invocation": invocation, "request_id": request_id}
            body |= {"reattached": reattached, "heartbeat_seconds": heartbeat}
        case Queued(position, message):
            body = {"type": "queued", "position": position, "message": message}
        case Started(attempt, cluster, job_id):
            body = {"type": "started", "attempt": attempt, "cluster": cluster, "job_id": job_id}
        case Output(attempt, stream, offset, data):
            body = {"type": "output", "attempt": attempt, "stream": stream, "offset": offset}
            body["data"] = base64.b64encode(data).decode()
        case Result(result, exit_status):
            body = {"type": "result", "result": dict(result), "exit_status": exit_status}
        case Stopping(message):
            body = {"type": "stopping", "message": message}
        case Cancelling(message):
            body = {"type": "cancelling", "message": message}
        case Capabilities(capabilities, notes):
            body = {"type": "capabilities", "capabilities": dict(capabilities)}
            if notes is not None:
                body["notes"] = notes
        case Refused(message, name):
            body = {"type": "refused", "field": name, "message": message}
        case Heartbeat():
            body = {"type": "heartbeat"}
        case Busy(message, retry_after):
            body = {"type": "busy", "retry_after": retry_after, "message": message}
    return encode_line({"version": PROTOCOL_VERSION, **body})


def decode_reply(line: bytes) -> Reply:
    data = json_object(line)
    if data.get("version") != PROTOCOL_VERSION:
        raise ProtocolError(f"reply: unsupported protocol version {data.get('version')!r}")
    kind = data.get("type")
    try:
        return _reply(kind, data)
    except (KeyError, TypeError, ValueError, binascii.Error) as exc:
        raise ProtocolError(f"reply: malformed {kind} message") from exc


def _reply(kind: Any, data: dict[str, Any]) -> Reply:
    if kind == "accepted":
        return Accepted(
            _str(data["invocation"]),
            _str(data["request_id"]),
            _bool(data["reattached"]),
            _seconds(data["heartbeat_seconds"]),
        )
    if kind == "queued":
        return Queued(_int(data["position"]), _str(data["message"]))
    if kind == "started":
        return Started(_int(data["attempt"]), _opt(data["cluster"]), _opt(data["job_id"]))
    if kind == "output" and data["stream"] in ("stdout", "stderr"):
        raw = base64.b64decode(data["data"], validate=True)
        return Output(_int(data["attempt"]), data["stream"], _int(data["offset"]), raw)
    if kind == "result" and isinstance(data["result"], dict):
        return Result(data["result"], _int(data["exit_status"]))
    if kind in ("stopping", "cancelling"):
        return (Stopping if kind == "stopping" else Cancelling)(_str(data["message"]))
    if kind == "capabilities" and isinstance(data["capabilities"], dict):
        return Capabilities(data["capabilities"], _opt(data.get("notes")))
    if kind == "refused":
        return Refused(_str(data["message"]), _opt(data.get("field")))
    if kind == "heartbeat":
        return Heartbeat()
    if kind == "busy":
        return Busy(_str(data["message"]), _seconds(data["retry_after"]))
    raise ProtocolError(f"reply: unknown message type {kind!r}")


def _int(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise TypeError(value)
    return value


def _seconds(value: Any) -> float:
    if type(value) not in (int, float) or not 0 < value < 86400:
        raise TypeError(value)
    return float(value)


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def _opt(value: Any) -> str | None:
    return None if value is None else _str(value)


def _bool(value: Any) -> bool:
    if type(value) is not bool:
        raise TypeError(value)
    return value
