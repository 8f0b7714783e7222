"""The wire protocol between `vibesys-gpu` and the broker: typed, versioned JSON lines.

Pure (sans-I/O, in the manner of h11): bytes go in, typed events come out, and replies are
encoded to bytes; the caller owns the socket. The client sends exactly one request line:

    {"version": 1, "token": "...", "cwd": "/abs/dir", "argv": ["python", "t.py"],
     "gpus": 1, "time_minutes": 10, "env": {"NAME": "value"}}

(`time_minutes` may be null: the operator's default applies. An optional `"timeout_seconds": S`
ends the command S seconds after it was submitted, exactly: the job's time limit is whole
minutes, so the broker cancels it at the second, and the client exits 124. An optional
`"profile": "NAME"` runs the command under the profiler the operator configured by that name;
its captures come back, once the job ended, as `capture` lines (the file's bytes, in order)
each closed by a `captured` line with its size and sha256, before `exit`.) It then keeps its
end open; closing it, or losing it, means "stop the command". The broker answers with any
number of lines:

    {"version": 1, "type": "waiting", "active": 2, "cap": 2, "ahead": 1, "message": "..."}
    {"version": 1, "type": "output", "stream": "stdout", "data": "<base64>"}
    {"version": 1, "type": "capture", "name": "profile.json", "data": "<base64>"}
    {"version": 1, "type": "captured", "name": "profile.json", "size": 2752, "sha256": "..."}
    {"version": 1, "type": "exit", "status": 0}
    {"version": 1, "type": "refused", "message": "commands must run from inside ..."}

and closes after `exit` or `refused`. Output bytes travel as base64: a command's output is bytes,
not text. Every bad line is refused with a message that says what is wrong; nothing in a
refusal repeats the token.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal

__all__ = [
    "MAX_REPLY_BYTES",
    "MAX_REQUEST_BYTES",
    "PROTOCOL_VERSION",
    "Capture",
    "Captured",
    "Exit",
    "LineDecoder",
    "LineTooLong",
    "Output",
    "ProtocolError",
    "Refused",
    "Reply",
    "Request",
    "Waiting",
    "decode_reply",
    "decode_request",
    "encode_reply",
    "encode_request",
    "token_matches",
    "waiting_line",
]

PROTOCOL_VERSION: Final = 1
#: A request holds an argv and an environment; a megabyte is far beyond any honest one.
MAX_REQUEST_BYTES: Final = 1 << 20
#: Output is sent in chunks well below this (base64 grows them by a third).
MAX_REPLY_BYTES: Final = 1 << 20

#: Bounds of a request's numbers: more GPUs than any node has, longer than ten days, is a mistake.
MAX_GPUS: Final = 1024
MAX_MINUTES: Final = 10 * 24 * 60
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_REQUEST_FIELDS: Final = ("version", "token", "cwd", "argv", "gpus", "time_minutes", "env")
#: Fields a request may leave out (a client older than them sends none).
_OPTIONAL_FIELDS: Final = ("timeout_seconds", "profile")
_PROFILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_CAPTURE_NAME = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]{0,254}")

Stream = Literal["stdout", "stderr"]


class ProtocolError(ValueError):
    """A line that is not a valid message; the text says why, for the peer to read."""


class LineTooLong(ProtocolError):
    """A line grew past the limit before its newline arrived."""


@dataclass(frozen=True, slots=True)
class Request:
    """One GPU command, as the client asked for it (not yet checked against anything)."""

    token: str
    cwd: str
    argv: tuple[str, ...]
    gpus: int
    time_minutes: int | None
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    version: int = PROTOCOL_VERSION
    #: cancel the command this many seconds after its submission (None: its time limit only)
    timeout_seconds: int | None = None
    #: the profiler to run the command under, by the operator's name for it
    profile: str | None = None

    def __post_init__(self) -> None:
        # A read-only view, so a frozen request cannot be changed through its mapping.
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))

    def __repr__(self) -> str:  # never print the token
        return (
            f"Request(cwd={self.cwd!r}, argv={self.argv!r}, gpus={self.gpus}, "
            f"time_minutes={self.time_minutes}, timeout_seconds={self.timeout_seconds}, "
            f"profile={self.profile!r}, env=<{len(self.env)} variables>)"
        )


@dataclass(frozen=True, slots=True)
class Output:
    stream: Stream
    data: bytes


@dataclass(frozen=True, slots=True)
class Waiting:
    """The command waits for a free slot under `max_concurrent_jobs`."""

    active: int
    cap: int
    ahead: int


@dataclass(frozen=True, slots=True)
class Exit:
    status: int


@dataclass(frozen=True, slots=True)
class Refused:
    message: str


@dataclass(frozen=True, slots=True)
class Capture:  # the next bytes of a capture file
    name: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Captured:  # a capture file is complete: the client checks what it wrote against these
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


def token_matches(request: Request, expected: str) -> bool:
    """Constant-time comparison, so the time taken tells nothing about the token."""
    return hmac.compare_digest(request.token.encode("utf-8"), expected.encode("utf-8"))


# -- lines -----------------------------------------------------------------------------------


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


# -- requests --------------------------------------------------------------------------------


def encode_request(request: Request) -> bytes:
    body = {
        "version": request.version,
        "token": request.token,
        "cwd": request.cwd,
        "argv": list(request.argv),
        "gpus": request.gpus,
        "time_minutes": request.time_minutes,
        "env": dict(request.env),
    }
    if request.timeout_seconds is not None:
        body["timeout_seconds"] = request.timeout_seconds
    if request.profile is not None:
        body["profile"] = request.profile
    return _line(body)


def decode_request(line: bytes) -> Request:
    """The request on one line (without its newline). ProtocolError says what is wrong."""
    data = _object(line)
    version = data.get("version")
    if type(version) is not int:
        raise ProtocolError("request: 'version' must be an integer")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            f"unsupported protocol version {version} (this broker speaks {PROTOCOL_VERSION}); "
            "use the vibesys-gpu that came with this broker"
        )
    unknown = sorted(set(data) - set(_REQUEST_FIELDS) - set(_OPTIONAL_FIELDS))
    if unknown:
        raise ProtocolError(f"request: unknown field {field_label(unknown[0])}")
    missing = [name for name in _REQUEST_FIELDS if name not in data]
    if missing:
        raise ProtocolError(f"request: missing field {missing[0]!r}")
    token, cwd, argv = data["token"], data["cwd"], data["argv"]
    if not isinstance(token, str) or not token:
        raise ProtocolError("request: 'token' must be a non-empty string")
    if not isinstance(cwd, str) or not cwd.startswith("/") or "\0" in cwd:
        raise ProtocolError("request: 'cwd' must be an absolute path")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise ProtocolError("request: 'argv' must be a non-empty list of strings")
    if any("\0" in a for a in argv) or not argv[0]:
        raise ProtocolError("request: 'argv' items may not contain NUL; the program may not be ''")
    gpus = data["gpus"]
    if type(gpus) is not int or not 0 <= gpus <= MAX_GPUS:
        raise ProtocolError(f"request: 'gpus' must be an integer from 0 to {MAX_GPUS}")
    minutes = data["time_minutes"]
    if minutes is not None and (type(minutes) is not int or not 0 < minutes <= MAX_MINUTES):
        raise ProtocolError(
            f"request: 'time_minutes' must be null or an integer from 1 to {MAX_MINUTES}"
        )
    timeout = data.get("timeout_seconds")
    if timeout is not None and (type(timeout) is not int or not 0 < timeout <= MAX_MINUTES * 60):
        raise ProtocolError(
            f"request: 'timeout_seconds' must be null or an integer from 1 to {MAX_MINUTES * 60}"
        )
    profile = data.get("profile")
    if profile is not None and (not isinstance(profile, str) or not _PROFILE.fullmatch(profile)):
        raise ProtocolError(
            "request: 'profile' must be null or a profiler's name (letters, digits, . _ -)"
        )
    return Request(
        token=token,
        cwd=cwd,
        argv=tuple(argv),
        gpus=gpus,
        time_minutes=minutes,
        env=_environment(data["env"]),
        version=version,
        timeout_seconds=timeout,
        profile=profile,
    )


def _environment(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ProtocolError("request: 'env' must be an object of strings")
    for number, (name, text) in enumerate(value.items(), 1):
        if not _ENV_NAME.fullmatch(name):  # not echoed: it may be a value in the wrong place
            raise ProtocolError(f"request: env: name #{number} is not a variable name")
        if not isinstance(text, str) or "\0" in text:
            raise ProtocolError(f"request: env: {name} must be a string without NUL")
    return dict(value)


# -- replies ---------------------------------------------------------------------------------


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
    return _line({"version": PROTOCOL_VERSION, **body})


def decode_reply(line: bytes) -> Reply:
    data = _object(line)
    if data.get("version") != PROTOCOL_VERSION:
        raise ProtocolError(f"reply: unsupported protocol version {data.get('version')!r}")
    kind = data.get("type")
    try:
        if kind == "output" and data["stream"] in ("stdout", "stderr"):
            return Output(data["stream"], base64.b64decode(data["data"], validate=True))
        if kind == "waiting":
            return Waiting(_int(data["active"]), _int(data["cap"]), _int(data["ahead"]))
        if kind == "exit":
            return Exit(_int(data["status"]))
        if kind == "refused" and isinstance(data["message"], str):
            return Refused(data["message"])
        if kind == "capture" and _CAPTURE_NAME.fullmatch(data["name"]):
            return Capture(data["name"], base64.b64decode(data["data"], validate=True))
        if kind == "captured" and _CAPTURE_NAME.fullmatch(data["name"]):
            return Captured(data["name"], _int(data["size"]), str(data["sha256"]))
    except (KeyError, TypeError, binascii.Error) as exc:
        raise ProtocolError(f"reply: malformed {kind} message") from exc
    raise ProtocolError(f"reply: unknown message type {kind!r}")


def _int(value: Any) -> int:
    if type(value) is not int:
        raise TypeError(value)
    return value


#: The longest integer a message may carry (every bound is far below; a longer one costs
#: quadratic time to convert).
MAX_INTEGER_DIGITS: Final = 30


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise ProtocolError(
            f"malformed message: an integer of more than {MAX_INTEGER_DIGITS} digits"
        )
    return int(text)


_FIELD_NAME = re.compile(r"[a-z_]{1,40}")


def shown_field(name: str) -> str | None:
    """A field name as a refusal may repeat it, or None: a peer's odd key (which could be a
    secret pasted in the wrong place) is never echoed back."""
    return name if _FIELD_NAME.fullmatch(name) else None


def field_label(name: str) -> str:
    shown = shown_field(name)
    return "(a field that is not a lowercase name)" if shown is None else repr(shown)


def _no_constant(text: str) -> None:
    raise ProtocolError(f"malformed message: {text} is not JSON")


def _object(line: bytes) -> dict[str, Any]:
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


def _line(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=True).encode("ascii") + b"\n"
