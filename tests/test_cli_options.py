"""The entry point's own parsers (`vibesys/cli/main.py` for the read-only commands,
`vibesys/cli/run_options.py` for `run`) and typer's command tree know the same options: a
walk of the tree checks each against the other, both ways, so neither can drift."""

from __future__ import annotations

from typing import Any

import pytest
import typer.main

from vibesys.cli import main as fast
from vibesys.cli.app import app, refresh_run_options
from vibesys.cli.run_options import COMMON, adapter_options

#: What typer alone answers on purpose (the fast path hands the command line over).
TYPER_ONLY = {("logs",): {"--follow"}}


def command(path: tuple[str, ...]) -> Any:
    """The command typer builds for `vibesys PATH...` (typer's own click: read by duck type)."""
    refresh_run_options()
    found: Any = typer.main.get_command(app)
    for word in path:
        found = found.commands[word]
    return found


def arguments(cmd: Any) -> list[Any]:
    return [p for p in cmd.params if p.param_type_name == "argument"]


def options(cmd: Any) -> tuple[set[str], set[str]]:
    """(long options that take a value, long flags and their --no- forms), --help aside."""
    valued: set[str] = set()
    flags: set[str] = set()
    for param in cmd.params:
        if param.param_type_name != "option":
            continue
        names = {n for n in [*param.opts, *param.secondary_opts] if n.startswith("--")}
        (flags if param.is_flag else valued).update(names - {"--help"})
    return valued, flags


@pytest.mark.parametrize("path", sorted(fast._POSITIONALS), ids=" ".join)
def test_the_fast_commands_know_typers_options(path: tuple[str, ...]) -> None:
    cmd = command(path)
    valued, flags = options(cmd)
    typer_only = TYPER_ONLY.get(path, set())
    assert fast._VALUED[path] == valued - typer_only
    assert fast._FLAGS[path] == flags - typer_only
    assert fast._POSITIONALS[path] == len(arguments(cmd))


def test_every_fast_command_is_a_typer_command() -> None:
    assert set(fast._VALUED) == set(fast._FLAGS) == set(fast._POSITIONALS)
    for path in fast._POSITIONALS:
        assert command(path).name == path[-1]


def test_run_is_declared_once() -> None:
    """`run`'s parser reads the same tables typer's command is built from."""
    declared = [*COMMON, *adapter_options().values()]
    valued = {o.flag for o in declared if o.kind is not bool}
    flags = {o.flag for o in declared if o.kind is bool}
    flags |= {"--no-" + o.flag[2:] for o in declared if o.negatable}
    assert options(command(("run",))) == (valued, flags)
