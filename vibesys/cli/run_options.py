"""`vibesys run`'s options as plain data: the options every adapter takes are declared here;
each adapter's own come from its registry entry. The typer command (`run.py`) is declared
from these tables; the checks the values pass are `run_checks.py`'s."""

from __future__ import annotations

from pathlib import Path

from vibesys.adapters.registry import ADAPTERS, Option
from vibesys.errors import DEFAULT_JOURNAL

__all__ = ["COMMON", "JOURNAL", "JSON", "adapter_options", "takers"]

#: `--journal` and `--json`, which every command that reads or writes the journal takes (the
#: typer app declares its other commands' from these too).
JOURNAL = Option(
    "--journal",
    "journal",
    f"Journal file \\[default: {DEFAULT_JOURNAL}]",
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
