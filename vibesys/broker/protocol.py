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
refusal repeats the token. The replies are in `vibesys.broker.replies`; the framing is
`vibesys.service.framing`, the bridge's too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

import msgspec

from vibesys.broker.replies import MAX_REPLY_BYTES, PROTOCOL_VERSION
from vibesys.service.framing import (
    LineDecoder,
    LineTooLong,
    ProtocolError,
    encode_line,
    field_label,
    json_object,
)
from vibesys.service.tokens import tokens_match

__all__ = [
    "MAX_CALL_BYTES",
    "MAX_REPLY_BYTES",
    "PROTOCOL_VERSION",
    "BrokerCall",
    "LineDecoder",
    "LineTooLong",
    "ProtocolError",
    "decode_call",
    "encode_call",
    "token_matches",
]

#: A request holds an argv and an environment; a megabyte is far beyond any honest one.
MAX_CALL_BYTES: Final = 1 << 20

#: Bounds of a request's numbers: more GPUs than any node has, longer than ten days, is a mistake.
MAX_GPUS: Final = 1024
MAX_MINUTES: Final = 10 * 24 * 60
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CALL_FIELDS: Final = ("version", "token", "cwd", "argv", "gpus", "time_minutes", "env")
#: Fields a request may leave out (a client older than them sends none).
_OPTIONAL_FIELDS: Final = ("timeout_seconds", "profile")
_PROFILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class BrokerCall(msgspec.Struct, frozen=True):
    """One GPU command, as the client asked for it (not yet checked against anything)."""

    token: str
    cwd: str
    argv: tuple[str, ...]
    gpus: int
    time_minutes: int | None
    env: Mapping[str, str] = msgspec.field(default_factory=dict)
    version: int = PROTOCOL_VERSION
    #: cancel the command this many seconds after its submission (None: its time limit only)
    timeout_seconds: int | None = None
    #: the profiler to run the command under, by the operator's name for it
    profile: str | None = None

    def __post_init__(self) -> None:
        # A read-only view, so a frozen request cannot be changed through its mapping.
        msgspec.structs.force_setattr(self, "env", MappingProxyType(dict(self.env)))

    def __repr__(self) -> str:  # never print the token
        return (
            f"BrokerCall(cwd={self.cwd!r}, argv={self.argv!r}, gpus={self.gpus}, "
            f"time_minutes={self.time_minutes}, timeout_seconds={self.timeout_seconds}, "
            f"profile={self.profile!r}, env=<{len(self.env)} variables>)"
        )


def token_matches(call: BrokerCall, expected: str) -> bool:
    """Constant-time comparison, so the time taken tells nothing about the token."""
    return tokens_match(call.token, expected)


def encode_call(call: BrokerCall) -> bytes:
    body = {
        "version": call.version,
        "token": call.token,
        "cwd": call.cwd,
        "argv": list(call.argv),
        "gpus": call.gpus,
        "time_minutes": call.time_minutes,
        "env": dict(call.env),
    }
    if call.timeout_seconds is not None:
        body["timeout_seconds"] = call.timeout_seconds
    if call.profile is not None:
        body["profile"] = call.profile
    return encode_line(body)


def decode_call(line: bytes) -> BrokerCall:
    """The request on one line (without its newline). ProtocolError says what is wrong."""
    data = json_object(line)
    version = data.get("version")
    if type(version) is not int:
        raise ProtocolError("request: 'version' must be an integer")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            f"unsupported protocol version {version} (this broker speaks {PROTOCOL_VERSION}); "
            "use the vibesys-gpu that came with this broker"
        )
    unknown = sorted(set(data) - set(_CALL_FIELDS) - set(_OPTIONAL_FIELDS))
    if unknown:
        raise ProtocolError(f"request: unknown field {field_label(unknown[0])}")
    missing = [name for name in _CALL_FIELDS if name not in data]
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
    return BrokerCall(
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
