"""The wire protocol between `vibesys-eval` and the evaluation bridge: versioned JSON lines.

Pure (sans-I/O, as `vibesys.broker.protocol`): bytes go in, typed values come out, replies are
encoded to bytes; the caller owns the socket. The helper sends one request line, `op` saying
which kind:

    {"version": 1, "op": "evaluate", "token": "vbeval1.…", "request_id": "r-1",
     "run": "campaign-7", "workspace": "/abs/worktree", "kind": "accuracy",
     "argv": ["python", "eval.py"], "timeout_seconds": 600, "env": {"SEED": "1"},
     "artifacts": ["results/*.json"], "resume": {"attempt": 1, "stdout": 0, "stderr": 0}}
    {"version": 1, "op": "cancel", "token": "…", "request_id": "r-1", "run": "…",
     "workspace": "…"}
    {"version": 1, "op": "capabilities", "token": "…"}

(`timeout_seconds` may be null: the session's default; `env`, `artifacts` and `resume` may be
left out. A profile, `"kind": "profile"`, names the profiler to run the command under,
`"profiler": "py-spy"`, by the operator's name for it; no other kind carries one.) Strict: a
field this version does not define is refused by name, and so, with the reason, is a field
naming what only the operator decides (a host, an account, a partition, a profile, an adapter,
a mount path, a journal, resources). The bridge answers with lines:

    {"version": 1, "type": "accepted", "invocation": "…", "request_id": "r-1",
     "reattached": false, "heartbeat_seconds": 5}
    {"version": 1, "type": "queued", "position": 0, "message": "…"}
    {"version": 1, "type": "started", "attempt": 1, "cluster": "…", "job_id": "…"}
    {"version": 1, "type": "output", "attempt": 1, "stream": "stdout", "offset": 0,
     "data": "<base64>"}
    {"version": 1, "type": "result", "result": {JobResult}, "exit_status": 0}
    {"version": 1, "type": "stopping", "message": "the session is shutting down …"}
    {"version": 1, "type": "cancelling", "message": "…"}
    {"version": 1, "type": "capabilities", "capabilities": {…}, "notes": "# Runtime notes…"}
    {"version": 1, "type": "refused", "field": "partition", "message": "…"}
    {"version": 1, "type": "heartbeat"}
    {"version": 1, "type": "busy", "retry_after": 1.0, "message": "the bridge is busy …"}

and closes after `result`, `refused`, `cancelling`, `capabilities` or `busy`. While an
evaluation waits or runs, a `heartbeat` comes whenever nothing else did for
`heartbeat_seconds`; `busy` (every connection served at once is taken) asks the helper to try
again, and was sent before the request was read. Output bytes travel as
base64 with their offset in the attempt's log: a helper that reconnects with `resume` gets
what it has not seen, never a byte twice. Nothing in a refusal repeats the token. The replies
are in `vibesys.bridge.replies`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, Literal

import msgspec

from vibesys.service.framing import (
    LineDecoder,
    LineTooLong,
    ProtocolError,
    encode_line,
    field_label,
    json_object,
    shown_field,
)

__all__ = [
    "CALL_FIELDS",
    "FORBIDDEN_FIELDS",
    "KINDS",
    "MAX_CALL_BYTES",
    "PROFILE",
    "PROTOCOL_VERSION",
    "BridgeCall",
    "FieldError",
    "LineDecoder",
    "LineTooLong",
    "ProtocolError",
    "Resume",
    "decode_call",
    "encode_call",
    "first_difference",
    "refusal_field",
]

PROTOCOL_VERSION: Final = 1
#: An argv and a few variables; a megabyte is far beyond any honest request.
MAX_CALL_BYTES: Final = 1 << 20
KINDS: Final = ("accuracy", "benchmark", "profile")
#: The kind that runs the command under a profiler (`profiler` names which).
PROFILE: Final = "profile"
MAX_ARTIFACTS: Final = 64

Op = Literal["evaluate", "cancel", "capabilities"]

#: Every field a request may carry, by op (`version`, `op` and `token` always).
CALL_FIELDS: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "evaluate": (
            "request_id",
            "run",
            "workspace",
            "kind",
            "argv",
            "timeout_seconds",
            "env",
            "artifacts",
            "resume",
            "profiler",
        ),
        "cancel": ("request_id", "run", "workspace"),
        "capabilities": (),
    }
)
_OPTIONAL: Final = frozenset({"env", "artifacts", "resume", "profiler"})
_COMMON: Final = ("version", "op", "token")

#: Fields the sandbox may never send, and who decides instead: refused with that reason.
FORBIDDEN_FIELDS: Final[Mapping[str, str]] = MappingProxyType(
    {
        **dict.fromkeys(("host", "hostname", "login", "login_node", "ssh"), "host"),
        **dict.fromkeys(("account", "qos", "reservation"), "account"),
        **dict.fromkeys(("partition", "partitions"), "partition"),
        **dict.fromkeys(("profile", "cluster", "infra", "site"), "profile"),
        **dict.fromkeys(("adapter", "backend"), "adapter"),
        **dict.fromkeys(
            ("mount", "mounts", "mount_path", "workdir", "remote_root", "artifact_root"),
            "mount path",
        ),
        **dict.fromkeys(("journal", "journal_path"), "journal"),
        **dict.fromkeys(
            ("nodes", "gpus", "accelerators", "accelerators_per_node", "resources"), "resources"
        ),
    }
)

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_RUN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_PROFILER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: The largest `resume` number: a byte offset into a log (2**53, exact in every JSON reader).
MAX_OFFSET: Final = 1 << 53
#: Ten days: anything longer is a mistake in seconds.
_MAX_TIMEOUT = 10 * 86400


class Resume(msgspec.Struct, frozen=True):
    """Where the helper's copy of the output stands: bytes of `attempt`'s logs it has."""

    attempt: int = 0
    stdout: int = 0
    stderr: int = 0


class BridgeCall(msgspec.Struct, frozen=True):
    """One request, as the helper sent it (not yet checked against the session)."""

    op: Op
    token: str
    request_id: str = ""
    run: str = ""
    workspace: str = ""
    kind: str = "accuracy"
    argv: tuple[str, ...] = ()
    timeout_seconds: int | None = None
    env: Mapping[str, str] = msgspec.field(default_factory=dict)
    artifacts: tuple[str, ...] = ()
    resume: Resume = msgspec.field(default_factory=Resume)
    version: int = PROTOCOL_VERSION
    #: the operator's profiler a profile runs under, by name (None: not a profile)
    profiler: str | None = None

    def __post_init__(self) -> None:
        msgspec.structs.force_setattr(self, "env", MappingProxyType(dict(self.env)))

    def __repr__(self) -> str:  # never print the token or the variables' values
        return (
            f"BridgeCall(op={self.op!r}, request_id={self.request_id!r}, run={self.run!r}, "
            f"kind={self.kind!r}, profiler={self.profiler!r}, argv={self.argv!r}, "
            f"env=<{sorted(self.env)}>)"
        )

    def identity(self) -> dict[str, Any]:
        """What makes two evaluate requests the same request: everything but the token, the
        variables' values (secrets: compared apart, never stored in the journal) and resume."""
        return {
            "run": self.run,
            "workspace": self.workspace,
            "kind": self.kind,
            "argv": list(self.argv),
            "timeout_seconds": self.timeout_seconds,
            "env": sorted(self.env),
            "artifacts": list(self.artifacts),
            "profiler": self.profiler,
        }


def first_difference(recorded: Mapping[str, Any], sent: Mapping[str, Any]) -> str | None:
    """The first identity field in which two requests differ (None: the same request)."""
    names = ("run", "workspace", "kind", "argv", "timeout_seconds", "env", "artifacts", "profiler")
    for name in names:
        if recorded.get(name) != sent.get(name):
            return name
    return None


# -- requests --------------------------------------------------------------------------------


def encode_call(call: BridgeCall) -> bytes:
    body: dict[str, Any] = {"version": call.version, "op": call.op, "token": call.token}
    if call.op != "capabilities":
        body |= {"request_id": call.request_id, "run": call.run}
        body["workspace"] = call.workspace
    if call.op == "evaluate":
        body |= {
            "kind": call.kind,
            "argv": list(call.argv),
            "timeout_seconds": call.timeout_seconds,
            "env": dict(call.env),
            "artifacts": list(call.artifacts),
            "resume": {
                "attempt": call.resume.attempt,
                "stdout": call.resume.stdout,
                "stderr": call.resume.stderr,
            },
        }
        if call.profiler is not None:
            body["profiler"] = call.profiler
    return encode_line(body)


def decode_call(line: bytes) -> BridgeCall:
    """The request on one line (without its newline); ProtocolError says what is wrong,
    naming the field (`refusal_field` tells which)."""
    data = json_object(line)
    version = data.get("version")
    if type(version) is not int:
        raise FieldError("version", "request: 'version' must be an integer")
    if version != PROTOCOL_VERSION:
        raise FieldError(
            "version",
            f"unsupported protocol version {version} (this bridge speaks {PROTOCOL_VERSION}); "
            "use the vibesys-eval that came with this session",
        )
    for name in sorted(data):
        if name in FORBIDDEN_FIELDS:
            what = FORBIDDEN_FIELDS[name]
            raise FieldError(
                name,
                f"request: {name!r} is not the sandbox's to choose: the session's operator "
                f"configuration decides the {what}; remove it",
            )
    op = data.get("op")
    if not isinstance(op, str) or op not in CALL_FIELDS:
        raise FieldError("op", f"request: 'op' must be one of {', '.join(CALL_FIELDS)}")
    allowed = (*_COMMON, *CALL_FIELDS[op])
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        shown = field_label(unknown[0])
        named = shown_field(unknown[0]) or "unknown"
        raise FieldError(named, f"request: unknown field {shown} for op {op!r}")
    missing = [name for name in allowed if name not in data and name not in _OPTIONAL]
    if missing:
        raise FieldError(missing[0], f"request: missing field {missing[0]!r}")
    token = data["token"]
    if not isinstance(token, str) or not token or not token.isascii():
        raise FieldError("token", "request: 'token' must be a non-empty ASCII string")
    if op == "capabilities":
        return BridgeCall(op="capabilities", token=token, version=version)
    request_id = _matching(data, "request_id", _ID, "1-128 letters, digits, . _ : -")
    run = _matching(data, "run", _RUN, "letters, digits, . _ -")
    workspace = data["workspace"]
    if not isinstance(workspace, str) or not workspace.startswith("/") or "\0" in workspace:
        raise FieldError("workspace", "request: 'workspace' must be an absolute path")
    if op == "cancel":
        return BridgeCall("cancel", token, request_id, run, workspace, version=version)
    kind = _kind(data["kind"])
    return BridgeCall(
        op="evaluate",
        token=token,
        request_id=request_id,
        run=run,
        workspace=workspace,
        kind=kind,
        argv=_argv(data["argv"]),
        timeout_seconds=_timeout(data["timeout_seconds"]),
        env=_environment(data.get("env", {})),
        artifacts=_artifacts(data.get("artifacts", [])),
        resume=_resume(data.get("resume", {})),
        version=version,
        profiler=_profiler(kind, data.get("profiler")),
    )


class FieldError(ProtocolError):
    """A bad request, and the field it is about."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message, name)


def refusal_field(error: ProtocolError) -> str | None:
    return error.field


def _matching(data: Mapping[str, Any], name: str, pattern: re.Pattern[str], rule: str) -> str:
    value = data[name]
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise FieldError(name, f"request: {name!r} must be {rule}")
    return value


def _kind(value: Any) -> str:
    if value not in KINDS:
        raise FieldError("kind", f"request: 'kind' must be one of {', '.join(KINDS)}")
    return str(value)


def _profiler(kind: str, value: Any) -> str | None:
    if kind != PROFILE:
        if value is not None:
            raise FieldError("profiler", "request: 'profiler' is for 'kind': 'profile' only")
        return None
    if value is None:
        raise FieldError("profiler", "request: a profile names its 'profiler'")
    if not isinstance(value, str) or not _PROFILER.fullmatch(value):
        raise FieldError(
            "profiler", "request: 'profiler' must be a profiler's name (letters, digits, . _ -)"
        )
    return value


def _argv(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
        raise FieldError("argv", "request: 'argv' must be a non-empty list of strings")
    if any("\0" in a for a in value) or not value[0]:
        raise FieldError("argv", "request: 'argv' items may not contain NUL; the program not ''")
    return tuple(value)


def _timeout(value: Any) -> int | None:
    if value is None:
        return None
    if type(value) is not int or not 0 < value <= _MAX_TIMEOUT:
        raise FieldError(
            "timeout_seconds",
            f"request: 'timeout_seconds' must be null or an integer from 1 to {_MAX_TIMEOUT}",
        )
    return value


def _environment(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise FieldError("env", "request: 'env' must be an object of strings")
    for number, (name, text) in enumerate(value.items(), 1):
        if not _ENV_NAME.fullmatch(name):  # not echoed: it may be a value in the wrong place
            raise FieldError("env", f"request: env: name #{number} is not a variable name")
        if not isinstance(text, str) or "\0" in text:
            raise FieldError("env", f"request: env: {name} must be a string without NUL")
    return dict(value)


def _artifacts(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise FieldError("artifacts", "request: 'artifacts' must be a list of globs")
    if len(value) > MAX_ARTIFACTS:
        raise FieldError("artifacts", f"request: at most {MAX_ARTIFACTS} artifact globs")
    for number, pattern in enumerate(value, 1):
        parts = pattern.split("/")
        if not pattern or pattern.startswith("/") or ".." in parts or "\0" in pattern:
            raise FieldError(
                "artifacts",
                f"request: artifact #{number} must be a relative glob inside the "
                "workspace (no '..', not absolute)",
            )
    return tuple(value)


def _resume(value: Any) -> Resume:
    if not isinstance(value, dict) or set(value) - {"attempt", "stdout", "stderr"}:
        raise FieldError("resume", "request: 'resume' must be {attempt, stdout, stderr}")
    numbers = {k: value.get(k, 0) for k in ("attempt", "stdout", "stderr")}
    if any(type(n) is not int or not 0 <= n <= MAX_OFFSET for n in numbers.values()):
        raise FieldError(
            "resume", f"request: 'resume' values must be integers from 0 to {MAX_OFFSET}"
        )
    return Resume(**numbers)
