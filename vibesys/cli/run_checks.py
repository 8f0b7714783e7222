"""The checks `vibesys run`'s values pass before anything is recorded (the command, the
numbers, the outputs it will write to, the working directory, the adapter's own options): a
problem is one `UsageError` line, and nothing has been written when it is raised."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from typing import Any

from msgspec import Struct, field

from vibesys.adapters.registry import entry, given_options
from vibesys.adapters.requests import AdapterRequest
from vibesys.cli.run_options import adapter_options
from vibesys.engine.failpoints import ENV, validate
from vibesys.errors import UsageError
from vibesys.journal_schema import Journal

__all__ = ["CheckedRun", "check_failpoints", "check_run"]

MAX_RETRIES = 100
MAX_SECONDS = 7 * 24 * 3600.0


class CheckedRun(Struct):
    adapter: str
    command: list[str]
    max_retries: int
    retry_delay: float
    unreachable_timeout: float
    cwd: str
    #: the adapter's own options that were given, by destination name
    adapter_values: dict[str, Any] = field(default_factory=dict)
    #: `--after`: the invocation to resolve to its current job
    after: str | None = None

    def resolve_after(self, journal: Journal) -> None:
        parent = journal.invocations.resolve(str(self.after))
        if parent.adapter != self.adapter or parent.job_id is None:
            raise UsageError(f"--after {self.after}: not an {self.adapter} invocation with a job")
        self.adapter_values["after"] = {"invocation": parent.id, "job_id": parent.job_id}

    def request(self) -> AdapterRequest:
        return entry(self.adapter).load().make_request(self.adapter, self.adapter_values)


def check_run(values: Mapping[str, Any]) -> CheckedRun:
    adapter = entry(str(values["adapter"]))
    command = list(values["command"] or [])
    if not command:
        raise UsageError("no command given; usage: vibesys run [OPTIONS] -- COMMAND [ARGS]...")
    given = given_options(
        adapter,
        {dest: values.get(dest) for dest in adapter_options()},
        hint=f"; see `vibesys run --adapter {adapter.name} --help`",
    )
    _check_outputs(detach=bool(values["detach"]))
    if values.get("name") is not None:
        _text("--name", str(values["name"]), "give a label that is UTF-8 text")
    if values.get("journal") is not None:
        _text("--journal", os.fspath(values["journal"]), "give a journal path that is UTF-8")
    after = given.pop("after", None)
    return CheckedRun(
        adapter=adapter.name,
        command=command,
        max_retries=int(
            _number("--max-retries", values["max_retries"], 0, MAX_RETRIES, whole=True)
        ),
        retry_delay=_number("--retry-delay", values["retry_delay"], 0, MAX_SECONDS),
        unreachable_timeout=_number(
            "--unreachable-timeout", values["unreachable_timeout"], 0, MAX_SECONDS
        ),
        cwd=_text("the current directory", _cwd(), "run from a directory whose path is UTF-8"),
        adapter_values=given,
        after=after,
    )


def check_failpoints() -> None:
    """The failpoints asked for in the environment must exist (a typo would crash nowhere).
    Checked after `check_run`, while the cluster's connection opens (`run_command._prewarm`)."""
    if unknown := validate(os.environ.get(ENV, "")):
        raise UsageError(
            f"{ENV} names unknown failpoint {unknown[0]!r} (see vibesys debug failpoints)"
        )


def _number(flag: str, text: object, low: float, high: float, *, whole: bool = False) -> float:
    try:
        value = float(str(text)) if not whole else int(str(text), 10)
    except ValueError:
        kind = "a whole number" if whole else "a number"
        raise UsageError(f"{flag} {text!r}: not {kind}") from None
    if not math.isfinite(value) or not low <= value <= high:
        raise UsageError(f"{flag} {text}: must be between {low:g} and {high:g}")
    return value


def _check_outputs(*, detach: bool) -> None:
    """The job's output and the final report go to stdout and stderr: both must be open."""
    for name, stream in (("stdout", sys.stdout), ("stderr", sys.stderr)):
        try:
            usable = stream is not None and os.fstat(stream.fileno()) is not None
        except (OSError, ValueError):
            usable = False
        if not usable:
            raise UsageError(f"{name} is closed; vibesys run needs it for the job's output")


def _cwd() -> str:
    try:
        return os.getcwd()
    except FileNotFoundError:
        raise UsageError("the current directory no longer exists; cd somewhere else") from None


def _text(what: str, value: str, fix: str) -> str:
    """`value` when it is UTF-8 text (the journal records it as such); else one line."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(value)
        raise UsageError(f"{what} {shown!r} is not UTF-8 text; {fix}") from None
    return value
