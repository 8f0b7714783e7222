"""`vibesys run`'s typer command, built from plain data: the common options of
`run_options.COMMON` and each adapter's own from its registry entry, declared as the command's
parameters when typer builds it. `vibesys run --adapter X --help` shows X's;
an option the chosen adapter does not take is refused, naming the adapter. Nothing here
imports an adapter: the registry entries are plain data."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperOption

from vibesys.adapters.registry import ADAPTERS, Option
from vibesys.cli.run_options import COMMON, JOURNAL, JSON, adapter_options, takers


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


def _click_option(option: Option, *, common: bool) -> TyperOption:
    """One of `run`'s options as the command declares it: from the plain table, so that a
    newly registered adapter's options appear without code here."""
    decl = f"{option.flag}/--no-{option.flag[2:]}" if option.negatable else option.flag
    flag = option.kind is bool
    return TyperOption(
        param_decls=[decl, option.dest],
        type=None if flag else option.kind,
        is_flag=flag,
        multiple=option.multiple,
        default=option.default if common else None,
        metavar=option.metavar,
        envvar=option.envvar,
        show_envvar=option.envvar is not None,
        help=option.help,
        show_default=common
        and not option.envvar
        and option.default is not None
        and (option.negatable or not flag),
        rich_help_panel=None if common else "Options of " + ", ".join(takers(option.dest)),
    )


def run_params() -> list[TyperArgument | TyperOption]:
    """`vibesys run`'s parameters: the command, the common options, then every registered
    adapter's options."""
    command = TyperArgument(
        param_decls=["command"], nargs=-1, required=False, help="The command, after --."
    )
    common = [_click_option(option, common=True) for option in COMMON]
    own = [_click_option(option, common=False) for option in adapter_options().values()]
    return [command, *common, *own]


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
    """`vibesys run`: its parameters come from the option tables (`run_params`), its body
    reads them from the context; for `--adapter X --help` it shows only the options X takes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["params"] = [*kwargs.get("params", []), *run_params()]
        super().__init__(*args, **kwargs)

    def invoke(self, ctx: Any) -> Any:
        # The body takes the context alone and reads the values from it.
        return ctx.invoke(self.callback)

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
