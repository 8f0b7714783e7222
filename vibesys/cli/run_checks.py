"""Everything `vibesys run` checks before anything is recorded: the command, the numbers, the
outputs it will write to, the working directory, and the adapter's own options (through the
registry). A problem is one `UsageError` line; nothing has been written when it is raised."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vibesys.adapters.registry import entry
from vibesys.cli.run_options import adapter_options, takers
from vibesys.errors import UsageError

if TYPE_CHECKING:
    from vibesys.adapters.requests import AdapterRequest
    from vibesys.journal_schema import Journal

MAX_RETRIES = 100
MAX_SECONDS = 7 * 24 * 3600.0


@dataclass
class CheckedRun:
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
        parent = journal.resolve(str(self.after))
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
    own = {o.dest for o in adapter.options}
    given: dict[str, Any] = {}
    for dest, option in adapter_options().items():
        value = values.get(dest)
        if value is None or value == [] or value == ():
            continue
        if dest not in own:
            others = " and ".join(takers(dest))
            raise UsageError(
                f"{option.flag} is not an option of the {adapter.name} adapter (only {others} "
                f"take it); see `vibesys run --adapter {adapter.name} --help`"
            )
        given[dest] = tuple(value) if isinstance(value, list) else value
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
    Separate from `check_run` because it loads the engine: `vibesys run` first starts
    reaching the cluster (an SSH connection), then checks this while the connection opens."""
    from vibesys.engine.failpoints import ENV, validate

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
