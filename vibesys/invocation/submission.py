"""A submission recorded as an invocation (PREPARED), exactly as `vibesys run` records it:
the adapter's request is built by the same registry functions from the same options, every
check comes before anything is written, and an idempotency key is recorded first
(`keys.py`). `vibesys.Client.submit` and `attach` are these and a handle; `vibesys run` is
`submit` and a `Driver`."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Final

from msgspec import Struct

from vibesys.adapters.registry import entry
from vibesys.errors import UsageError
from vibesys.invocation.keys import (
    CLIENT_RUN,
    Submission,
    argv_of,
    check_key,
    find_row,
    invocation_recorded,
    plain_options,
    record,
    record_found,
    submission_of,
    typed_options,
)
from vibesys.journal_schema import Journal

__all__ = ["MAX_RETRIES", "MAX_SECONDS", "Submitted", "attach", "submit"]

MAX_RETRIES: Final = 100
MAX_SECONDS: Final = 7 * 24 * 3600.0


class Submitted(Struct, frozen=True):
    """The invocation a submission (or a key, or an id) names, and the submission's timeout
    (seconds from its recording; None: none, or not a submission of a client)."""

    invocation_id: str
    timeout: float | None


def submit(
    journal: Journal,
    argv: Sequence[str],
    *,
    adapter: str = "local",
    key: str | None = None,
    label: str | None = None,
    candidate: str | os.PathLike[str] | None = None,
    artifacts: Sequence[str] = (),
    gpus: int | None = None,
    time_minutes: int | None = None,
    partition: str | None = None,
    slurm_config: str | os.PathLike[str] | None = None,
    profile: str | None = None,
    timeout: float | None = None,
    retries: int = 2,
    retry_delay: float = 2.0,
    unreachable_timeout: float = 600.0,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    **options: Any,
) -> Submitted:
    """Record `argv` as an invocation on `adapter` (`vibesys.Client.submit` says what each
    argument means). A key recorded before names its invocation at once, with nothing built
    again (its candidate may be gone by now); with other arguments it is refused
    (KeyConflict). Bad input raises UsageError (or ConfigError) with nothing recorded."""
    command = argv_of(argv)
    if key is not None:
        check_key(key)
    workdir = os.path.abspath(os.fspath(cwd)) if cwd is not None else os.getcwd()
    given = {
        **options,
        "candidate": candidate,
        "artifact": list(artifacts),
        "gpus": gpus,
        "time_minutes": time_minutes,
        "partition": partition,
        "slurm_config": slurm_config,
        "profile": profile,
    }
    sub = Submission(
        argv=command,
        adapter=entry(adapter).name,
        options=plain_options(adapter, given, workdir),
        label=label,
        cwd=workdir,
        env_names=sorted(env or {}),
        timeout=_timeout(timeout),
        retries=int(_number("retries", retries, 0, MAX_RETRIES, whole=True)),
        retry_delay=_number("retry_delay", retry_delay, 0, MAX_SECONDS),
        unreachable_timeout=_number("unreachable_timeout", unreachable_timeout, 0, MAX_SECONDS),
    )
    if key is not None and find_row(journal, key) is not None:
        # Submitted before: its request is built again only if its recorder died before
        # recording the invocation.
        inv = record(journal, sub, key, env, lambda: _request(journal, sub))
    else:
        request = _request(journal, sub)  # every check first: a refusal records nothing
        inv = record(journal, sub, key, env, lambda: request)
    return Submitted(inv.id, sub.timeout)


def attach(journal: Journal, key_or_id: str, *, record_missing: bool = True) -> Submitted:
    """The invocation of an idempotency key, or of an id (a unique prefix will do). A key
    whose recorder died before its invocation was recorded gets it recorded now, unless
    `record_missing` is False (a read-only journal): then UsageError says so."""
    row = find_row(journal, key_or_id)
    if row is not None:
        sub = submission_of(row)
        if not record_missing and not invocation_recorded(journal, row.invocation_id):
            raise UsageError(
                f"key {key_or_id!r}: its invocation {row.invocation_id} was never recorded "
                "(its submitter stopped first); attach or submit it again to record it"
            )
        invocation_id = record_found(journal, row, lambda: _request(journal, sub)).id
        return Submitted(invocation_id, sub.timeout)
    inv = journal.invocations.resolve(key_or_id)
    found = journal.bridge.recorded_evaluation_of(inv.id)
    client_row = found is not None and found.run_id == CLIENT_RUN
    timeout = submission_of(found).timeout if found is not None and client_row else None
    return Submitted(inv.id, timeout)


def _request(journal: Journal, sub: Submission) -> Any:
    """The adapter's typed request, built as `vibesys run` builds it (`make_request`)."""
    values = typed_options(sub.adapter, sub.options)
    if "after" in values:  # as `vibesys run --after`: the invocation's current job
        parent = journal.invocations.resolve(str(values["after"]))
        if parent.adapter != sub.adapter or parent.job_id is None:
            raise UsageError(f"after={values['after']}: not an {sub.adapter} invocation with a job")
        values["after"] = {"invocation": parent.id, "job_id": parent.job_id}
    return entry(sub.adapter).load().make_request(sub.adapter, values)


def _number(name: str, value: float, low: float, high: float, *, whole: bool = False) -> float:
    kinds = int if whole else int | float
    if isinstance(value, bool) or not isinstance(value, kinds) or not low <= value <= high:
        kind = "a whole number" if whole else "a number"
        raise UsageError(f"{name}={value!r}: must be {kind} between {low:g} and {high:g}")
    return value


def _timeout(value: float | None) -> float | None:
    if value is not None and (_number("timeout", value, 0, MAX_SECONDS) == 0):
        raise UsageError("timeout=0: give seconds above 0, or None for no timeout")
    return value
