"""`vibesys run`'s options as plain data, and the parser the entry point uses for them.

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

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vibesys.adapters.registry import ADAPTERS, Option

__all__ = ["COMMON", "JOURNAL", "JSON", "adapter_options", "parse_run_argv", "takers"]

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
    for entry in ADAPTERS.values():
        for option in entry.options:
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
