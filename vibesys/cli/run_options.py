"""`vibesys run`'s options as plain data, the parser the entry point uses for them, and the
checks they pass before anything is recorded (the command, the numbers, the outputs it will
write to, the working directory, the adapter's own options): a problem is one `UsageError`
line, and nothing has been written when it is raised.

The options every adapter takes are declared here; each adapter's own come from its registry
entry. The typer command (`run.py`) builds its signature from these same tables, so the
two parsers cannot disagree about which options exist. The entry point's parser exists
because `vibesys run` is started once per evaluation, often dozens at a time on a login
node: typer, click and the pydantic adapters typer builds for every option cost each of them
about a quarter of a second of CPU before anything is submitted. It takes only the plain
forms (`--flag VALUE`, `--flag=VALUE`, flags, the command after `--` or the first word) and
hands anything else (`--help`, an unknown or repeated option, a value it would have to
interpret) to the typer app, which answers as it always does.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msgspec import Struct, field

from vibesys.adapters.registry import ADAPTERS, Option, entry, given_options
from vibesys.errors import UsageError

if TYPE_CHECKING:
    from vibesys.adapters.requests import AdapterRequest
    from vibesys.journal_schema import Journal

__all__ = [
    "COMMON",
    "JOURNAL",
    "JSON",
    "CheckedRun",
    "adapter_options",
    "check_failpoints",
    "check_run",
    "parse_run_argv",
    "takers",
]

MAX_RETRIES = 100
MAX_SECONDS = 7 * 24 * 3600.0

#: `--journal` and `--json`, which every command that reads or writes the journal takes (the
#: typer app declares its other commands' from these too).
JOURNAL = Option(
    "--journal",
    "journal",
    "Journal file \\[default: .vibesys/journal.db]",
    Path,
    envvar="VIBESYS_JOURNAL",
)
JSON = Option("--json", "as_json", "Print one JSON object.", bool, default=False)

#: The options every adapter takes, in the order `vibesys run --help` lists them.
COMMON: tuple[Option, ...] = (
    JOURNAL,
    Option("--adapter", "adapter", "Where the job runs (see below).", default="local"),
    Option("--name", "name", "A label for people."),
    Option(
        "--max-retries",
        "max_retries",
        "Retries after infrastructure failures (0-100).",
        default="2",
        metavar="N",
    ),
    Option(
        "--retry-delay",
        "retry_delay",
        "Seconds before the first retry (doubles after); recorded with the run.",
        default="2",
        metavar="SECONDS",
    ),
    Option("--detach", "detach", "Return once the job runs.", bool, default=False, negatable=True),
    JSON,
    Option(
        "--unreachable-timeout",
        "unreachable_timeout",
        "Seconds a scheduler may stay unreachable (from its first unreachable observation), "
        "or an outcome open, before the job's fate is reported as unknown; recorded with the "
        "run, so `wait` and `reconcile` keep to it.",
        default="600",
        metavar="SECONDS",
    ),
)


def adapter_options() -> dict[str, Option]:
    """Every adapter option by destination name (one flag may serve several adapters)."""
    found: dict[str, Option] = {}
    for registered in ADAPTERS.values():
        for option in registered.options:
            found.setdefault(option.dest, option)
    return found


def takers(dest: str) -> list[str]:
    return [e.name for e in ADAPTERS.values() if any(o.dest == dest for o in e.options)]


def parse_run_argv(argv: Sequence[str]) -> dict[str, Any] | None:
    """`vibesys run`'s values (by destination name, as the typer command receives them) when
    `argv` (the words after `run`) is in a plain form; None when typer must parse it."""
    options = [*COMMON, *adapter_options().values()]
    by_flag = {o.flag: (o, True) for o in options}
    by_flag.update({"--no-" + o.flag[2:]: (o, False) for o in options if o.negatable})
    values: dict[str, Any] = {o.dest: [] if o.multiple else o.default for o in options}
    given: set[str] = set()
    words = list(argv)
    index = 0
    while index < len(words) and words[index] != "--" and words[index].startswith("-"):
        name, equals, text = words[index].partition("=")
        index += 1
        found = by_flag.get(name)
        if found is None or (found[0].dest in given and not found[0].multiple):
            return None  # --help, a short or unknown option, a repeat: typer's answer
        option, positive = found
        given.add(option.dest)
        if option.kind is bool:
            if equals:
                return None
            values[option.dest] = positive
            continue
        if not equals:
            if index >= len(words):
                return None
            text = words[index]
            index += 1
        value = _plain(option, text)
        if value is None:
            return None
        if option.multiple:
            values[option.dest].append(value)
        else:
            values[option.dest] = value
    command = words[index + 1 :] if words[index : index + 1] == ["--"] else words[index:]
    if not command:
        return None  # typer says what is missing
    values["command"] = command
    for option in COMMON:
        if option.envvar and option.dest not in given:
            from_env = os.environ.get(option.envvar)
            if from_env == "":
                return None  # click's reading of an empty variable decides
            if from_env is not None:
                values[option.dest] = option.kind(from_env)
    # typer hands a repeatable option that was not given over as None
    return {dest: (v or None) if isinstance(v, list) else v for dest, v in values.items()}


def _plain(option: Option, text: str) -> Any:
    """`text` as `option`'s value when no parser could read it otherwise; else None."""
    if not text or text.startswith("-") or text != text.strip():
        return None  # a value that looks like an option, or that typer may trim
    if option.kind is int:
        return int(text) if text.isascii() and text.isdecimal() else None
    if option.kind in (str, Path):
        return option.kind(text)
    return None


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
