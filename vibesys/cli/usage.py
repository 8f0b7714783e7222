"""A usage error as one line that helps: an unknown option or command is answered with the
real ones (the parser's own answer is one suggestion, often unrelated: `--bogus` got
`--gpus`). Read by duck typing: typer carries its own copy of click."""

from __future__ import annotations

import sys
from typing import Any

from vibesys.adapters.registry import ADAPTERS
from vibesys.cli.run import chosen_adapter
from vibesys.cli.run_options import COMMON

__all__ = ["usage_line"]


def usage_line(exc: Exception) -> str:
    """The one line for a usage error (without the `vibesys: error:` prefix)."""
    ctx: Any = getattr(exc, "ctx", None)
    kind = type(exc).__name__
    if kind == "NoSuchOption" and ctx is not None:
        return f"no such option: {getattr(exc, 'option_name', '?')}; {_options_of(ctx)}"
    message = str(getattr(exc, "message", ""))
    if ctx is not None and message.startswith("No such command") and message.count("'") >= 2:
        names = ", ".join(ctx.command.list_commands(ctx))
        return f"no such command {message.split(chr(39))[1]!r} ({ctx.command_path} has: {names})"
    format_message = getattr(exc, "format_message", None)
    text = format_message() if callable(format_message) else str(exc)
    return " ".join(str(text).split())


def _options_of(ctx: Any) -> str:
    """What `ctx`'s command takes, as a user types it."""
    flags: list[str] = []
    for param in ctx.command.get_params(ctx):
        if getattr(param, "param_type_name", "") != "option" or getattr(param, "hidden", False):
            continue
        long = [o for o in param.opts if o.startswith("--")] or list(param.opts)
        flags.append("/".join([long[0], *param.secondary_opts]))
    if ctx.info_name == "run" and ctx.parent is not None:
        common = {o.flag for o in COMMON} | {"--help"}
        chosen = ADAPTERS.get(chosen_adapter(sys.argv[2:]) or "local")
        if chosen is not None:
            common |= {o.flag for o in chosen.options}
            return f"vibesys run --adapter {chosen.name} takes {', '.join(_only(flags, common))}"
        return (
            f"{ctx.command_path} takes {', '.join(_only(flags, common))}, and each adapter's "
            "own (vibesys run --adapter NAME --help)"
        )
    return f"{ctx.command_path} takes {', '.join(flags) or 'no options'}"


def _only(flags: list[str], wanted: set[str]) -> list[str]:
    return [f for f in flags if f.split("/")[0] in wanted]
