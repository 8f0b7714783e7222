"""`vibesys.Client`'s submissions and their idempotency keys.

A key is recorded before anything is submitted, as the evaluation bridge records its request
ids (`journal_schema/recorded_evaluations.py`, in the same table: run id `:client`, which no bridge
run id can be): a row naming the invocation id it will get is committed first, then the
invocation is recorded (PREPARED), then driven. Whoever finds the row later (this process,
another one, one started after a crash) follows that invocation, or records it when a crash
came between the two commits: a key never gets a second invocation. The row's body is the
submission as its identity, so the same key with another command is refused.

Recording is serialized on this host by a lock file next to the invocation directories: a
process that finds a row without its invocation waits for the one recording it (or for its
death, which frees the lock) before it records the invocation itself.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

from msgspec import Struct, to_builtins

from vibesys.adapters.registry import entry, given_options
from vibesys.engine import Engine, RetryPolicy
from vibesys.engine.context import ENV_FILE, load_context
from vibesys.engine.core import new_invocation_id
from vibesys.engine.failpoints import failpoint
from vibesys.errors import UsageError
from vibesys.journal_schema import Invocation, Journal
from vibesys.journal_schema.recorded_evaluations import CLIENT_RUN, RecordedEvaluation

__all__ = [
    "CLIENT_RUN",
    "KeyConflict",
    "Recording",
    "RequestRow",
    "Submission",
    "find_row",
    "invocation_recorded",
    "record",
    "record_found",
    "record_request",
    "submission_of",
]

KIND: Final = "client"
MAX_KEY: Final = 200


class KeyConflict(UsageError):
    """The idempotency key was used before for another submission."""


class Submission(Struct, frozen=True):
    """Everything a submission records: its identity (what a retry with the same key must
    repeat exactly) and what recording its invocation needs, once more after a crash."""

    argv: list[str]
    adapter: str
    #: the adapter's own options that were given, by destination name, as JSON values
    options: dict[str, Any]
    label: str | None
    cwd: str
    #: the names of the variables given on top of the inherited environment (their values
    #: are compared with the recorded ones, never written to the journal)
    env_names: list[str]
    timeout: float | None
    retries: int
    retry_delay: float
    unreachable_timeout: float

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = to_builtins(self)
        return body


def request_id(key: str | None, invocation_id: str) -> str:
    """The row's request id: the caller's key, or (no key) the invocation's own id."""
    return f"key:{key}" if key is not None else f"id:{invocation_id}"


def check_key(key: str) -> str:
    if not key or len(key) > MAX_KEY or not key.isprintable():
        raise UsageError(f"key {key!r}: give 1 to {MAX_KEY} printable characters")
    return key


def plain_options(adapter: str, options: Mapping[str, Any], cwd: str) -> dict[str, Any]:
    """The adapter's options as JSON values, checked to be its own; paths made absolute from
    the job's working directory (a retry from elsewhere names the same files)."""
    given = given_options(entry(adapter), options, spell=lambda option: f"{option.dest}=")
    kinds = {o.dest: o.kind for o in entry(adapter).options}

    def plain(dest: str, value: Any) -> Any:
        if kinds[dest] is Path:
            return str(Path(cwd, os.fspath(value)))
        return value if kinds[dest] is not str else str(value)

    return {
        dest: [plain(dest, v) for v in value] if isinstance(value, tuple) else plain(dest, value)
        for dest, value in given.items()
    }


def typed_options(adapter: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The recorded options as `make_request` takes them (the CLI's types: Path, tuples)."""
    kinds = {o.dest: o for o in entry(adapter).options}
    typed: dict[str, Any] = {}
    for dest, value in options.items():
        option = kinds[dest]
        if isinstance(value, list):
            typed[dest] = tuple(Path(v) if option.kind is Path else v for v in value)
        else:
            typed[dest] = Path(value) if option.kind is Path else value
    return typed


def find_row(journal: Journal, key: str) -> RecordedEvaluation | None:
    return journal.bridge.recorded_evaluation(CLIENT_RUN, request_id(key, ""))


def record(
    journal: Journal,
    sub: Submission,
    key: str | None,
    env: Mapping[str, str] | None,
    build: Callable[[], Any],
) -> Invocation:
    """The invocation of `sub`: recorded now, after its key's row (write-ahead), with the
    adapter's request `build()` makes, or the one the key already names. KeyConflict when the
    key was used for another submission."""
    runs = journal.path.parent / "runs"
    with _recording(runs):
        row, _created = journal.bridge.claim_evaluation(
            run_id=CLIENT_RUN,
            request_id=request_id(key, new_id := new_invocation_id()),
            invocation_id=new_id,
            uid=os.getuid(),
            workspace=sub.cwd,
            kind=KIND,
            body=sub.body(),
            results_dir=None,
        )
        failpoint("after_key_commit")
        _same(key, row.body, sub.body())
        if not invocation_recorded(journal, row.invocation_id):
            return _prepare(journal, row, sub, env, build())
    inv = journal.invocations.get(row.invocation_id)
    _same_env(key, inv, env or {})
    return inv


def record_found(journal: Journal, row: RecordedEvaluation, build: Callable[[], Any]) -> Invocation:
    """The invocation `row` names, recorded now if its recorder died first (`attach`)."""
    with _recording(journal.path.parent / "runs"):
        if invocation_recorded(journal, row.invocation_id):
            return journal.invocations.get(row.invocation_id)
        sub = submission_of(row)
        if sub.env_names:
            raise UsageError(
                f"{row.request_id[4:]!r} was never recorded and its variables are not kept; "
                "submit it again with the same arguments"
            )
        return _prepare(journal, row, sub, None, build())


def submission_of(row: RecordedEvaluation) -> Submission:
    return Submission(**{name: row.body[name] for name in Submission.__struct_fields__})


def _prepare(
    journal: Journal,
    row: RecordedEvaluation,
    sub: Submission,
    env: Mapping[str, str] | None,
    request: Any,
) -> Invocation:
    recording = Recording(
        argv=sub.argv,
        adapter=sub.adapter,
        request=request,
        label=sub.label,
        cwd=sub.cwd,
        env={**os.environ, **(env or {})},
        retries=sub.retries,
        retry_delay=sub.retry_delay,
        unreachable_timeout=sub.unreachable_timeout,
    )
    return prepare(journal, row.invocation_id, recording)


class RequestRow(Struct, frozen=True, kw_only=True):
    """A request recorded before anything is submitted, under its caller's own ids (the
    evaluation bridge's: the campaign's run id and the helper's request id), with what the
    caller keeps beside it; the invocation id it names is given when it is first recorded."""

    run_id: str
    request_id: str
    uid: int
    workspace: str
    kind: str
    #: the request as its identity: what the same ids again must repeat (the caller checks)
    body: dict[str, Any]
    results_dir: str | None = None


class Recording(Struct, frozen=True, kw_only=True):
    """What recording a request's invocation takes: the command, the adapter's typed request,
    the job's working directory and its whole environment (nothing is inherited)."""

    argv: list[str]
    adapter: str
    #: the adapter's typed request (`make_request`'s, or a site's)
    request: Any
    label: str | None
    cwd: str
    env: dict[str, str]
    #: the campaign whose queue it joins: one of its invocations runs at a time
    campaign: str | None = None
    retries: int = 2
    retry_delay: float = 2.0
    unreachable_timeout: float = 600.0


def record_request(
    journal: Journal,
    row: RequestRow,
    check: Callable[[RecordedEvaluation], None],
    recording: Callable[[RecordedEvaluation], Recording],
) -> tuple[RecordedEvaluation, bool]:
    """`row` committed first (or the one its ids have already), then the invocation it names,
    recorded from `recording(row)` unless it is already; True when the row is new. `check`
    refuses the row found (by raising) before anything more is recorded."""
    with _recording(journal.path.parent / "runs"):
        found, created = journal.bridge.claim_evaluation(
            run_id=row.run_id,
            request_id=row.request_id,
            invocation_id=new_invocation_id(),
            uid=row.uid,
            workspace=row.workspace,
            kind=row.kind,
            body=row.body,
            results_dir=row.results_dir,
        )
        check(found)
        if not invocation_recorded(journal, found.invocation_id):
            prepare(journal, found.invocation_id, recording(found))
    return found, created


def prepare(journal: Journal, invocation_id: str, recording: Recording) -> Invocation:
    """Record the invocation a request row names (PREPARED): nothing was sent for it yet."""
    runs = journal.path.parent / "runs"
    # A crash between the environment file and the invocation's row left the file: the
    # invocation directory is this row's alone, and its recorder is gone (the lock says so).
    (runs / invocation_id / ENV_FILE).unlink(missing_ok=True)
    engine = Engine(
        journal,
        retry=RetryPolicy(recording.retries, recording.retry_delay),
        unreachable_timeout=timedelta(seconds=recording.unreachable_timeout),
    )
    return engine.prepare(
        adapter=recording.adapter,
        command=recording.argv,
        request=recording.request,
        label=recording.label,
        cwd=recording.cwd,
        env=recording.env,
        run_root=runs,
        invocation_id=invocation_id,
        campaign=recording.campaign,
    )


@contextmanager
def _recording(runs: Path) -> Iterator[None]:
    """Held while a key's row and its invocation are recorded; freed by death too."""
    runs.mkdir(parents=True, exist_ok=True)
    fd = os.open(runs / ".client-keys.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _same(key: str | None, recorded: Mapping[str, Any], wanted: Mapping[str, Any]) -> None:
    for name in sorted(set(recorded) | set(wanted)):
        if recorded.get(name) != wanted.get(name):
            raise KeyConflict(
                f"key {key!r} was submitted before with another {name} "
                f"({recorded.get(name)!r}, not {wanted.get(name)!r}); use a new key"
            )


def _same_env(key: str | None, inv: Invocation, env: Mapping[str, str]) -> None:
    if not env:
        return
    recorded = load_context(inv).env
    for name, value in env.items():
        if recorded.get(name) != value:
            raise KeyConflict(f"key {key!r} was submitted before with another value of {name}")


def invocation_recorded(journal: Journal, invocation_id: str) -> bool:
    found = journal.conn.execute("SELECT 1 FROM invocations WHERE id=?", (invocation_id,))
    return found.fetchone() is not None


def argv_of(argv: Sequence[str]) -> list[str]:
    command = [str(word) for word in argv]
    if not command:
        raise UsageError("no command given")
    return command
