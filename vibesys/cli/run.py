"""`vibesys run`'s typer command, built from plain data: the common options of
`run_options.COMMON` and each adapter's own from its registry entry (the entry point's own
parser reads the same tables). `vibesys run --adapter X --help` shows X's;
an option the chosen adapter does not take is refused, naming the adapter. Nothing here
imports an adapter: the registry entries are plain data."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from vibesys.adapters.registry import ADAPTERS, Option
from vibesys.cli.run_options import COMMON, JOURNAL, JSON, adapter_options, takers

#: `vibesys run`'s command, after `--`.
_COMMAND = ("command", Annotated[list[str] | None, typer.Argument(help="The command, after --.")])


def _common_annotation(option: Option) -> Any:
    """A common option (`run_options.COMMON`) as typer declares it."""
    decl = f"{option.flag}/--no-{option.flag[2:]}" if option.negatable else option.flag
    kind = option.kind if option.default is not None else option.kind | None
    settings: dict[str, Any] = {"help": option.help}
    if option.metavar:
        settings["metavar"] = option.metavar
    if option.envvar:
        settings.update(envvar=option.envvar, show_default=False)
    return Annotated[kind, typer.Option(decl, **settings)]


#: `--journal` and `--json` of every other command: the same declarations as `run`'s.
JournalOption = _common_annotation(JOURNAL)
JsonOption = _common_annotation(JSON)


def _annotation(option: Option) -> Any:
    kind = list[option.kind] if option.multiple else option.kind  # type: ignore[name-defined]
    panel = "Options of " + ", ".join(takers(option.dest))
    return Annotated[
        kind | None,
        typer.Option(option.flag, help=option.help, rich_help_panel=panel, show_default=False),
    ]


def with_run_signature(function: Callable[..., None]) -> Callable[..., None]:
    """Give `function(ctx, **values)` the signature typer reads: the common options, then
    every registered adapter's options."""
    parameters = [
        inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
    ]
    parameters.append(
        inspect.Parameter(
            _COMMAND[0], inspect.Parameter.KEYWORD_ONLY, annotation=_COMMAND[1], default=None
        )
    )
    for common in COMMON:
        parameters.append(
            inspect.Parameter(
                common.dest,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=_common_annotation(common),
                default=common.default,
            )
        )
    for dest, option in adapter_options().items():
        parameters.append(
            inspect.Parameter(
                dest, inspect.Parameter.KEYWORD_ONLY, annotation=_annotation(option), default=None
            )
        )
    function.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    function.__annotations__ = {p.name: p.annotation for p in parameters}
    return function


def chosen_adapter(args: list[str]) -> str | None:
    for index, arg in enumerate(args):
        if arg == "--":
            return None
        if arg == "--adapter" and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith("--adapter="):
            return arg.partition("=")[2]
    return None


def _asks_for_help(args: list[str]) -> bool:
    before = args[: args.index("--")] if "--" in args else args
    return "--help" in before


class RunCommand(TyperCommand):
    """Shows, for `--adapter X --help`, only the options X takes."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if _asks_for_help(args):
            ctx.meta["vibesys.help_for"] = chosen_adapter(args)
        return super().parse_args(ctx, args)

    def get_params(self, ctx: Any) -> list[Any]:
        # Every option parses (so one given to the wrong adapter is refused by name, not as
        # "no such option"); only the help narrows them to the chosen adapter's.
        params = super().get_params(ctx)
        chosen = ctx.meta.get("vibesys.help_for")
        if chosen not in ADAPTERS:
            return params
        own = {o.dest for o in ADAPTERS[chosen].options}
        others = set(adapter_options()) - own
        return [p for p in params if p.name not in others]


def adapters_epilog() -> str:
    """The list of adapters under `vibesys run --help` (the registry, as it is now)."""
    names = "; ".join(f"{e.name}: {e.summary}" for e in ADAPTERS.values())
    return f"Adapters: {names}. `vibesys run --adapter NAME --help` shows one adapter's options."
