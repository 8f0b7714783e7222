"""The operator's profilers (`[vibesys.agent_gpu.profilers.NAME]`): what a profile request,
which names only the profiler, turns into on the node.

`{capture}` in `command` is the capture's path. A GPU command's (`vibesys-gpu --profile`) is
inside its sandbox (`CAPTURE_DIR/CAPTURE_STEM`, a directory the node binds to the job's own
working directory, so what the profiler writes there is collected as the job's artifacts); in
`captures` it is the stem alone, so each capture names a file (or a glob) in that directory.
An evaluation's (`vibesys-eval --kind profile`) runs unconfined in the job's working directory
(its copy of the candidate): there `{capture}` is `EVALUATION_CAPTURE`, relative, the same
string in the command and in the captures. The agent's command follows `command`.
"""

from __future__ import annotations

import re
from typing import Final

from pydantic import BaseModel, Field, field_validator

from vibesys.config.strict import STRICT, StrTuple

__all__ = [
    "CAPTURE",
    "CAPTURE_DIR",
    "CAPTURE_STEM",
    "EVALUATION_CAPTURE",
    "ProfilerConfig",
    "check_profiler_name",
]

CAPTURE: Final = "{capture}"
#: Where the sandbox sees the job's working directory (never a host path: nothing else is there).
CAPTURE_DIR: Final = "/vibesys-capture"
CAPTURE_STEM: Final = "profile"
#: An evaluation's capture, relative to its job's working directory (the candidate's copy).
EVALUATION_CAPTURE: Final = "vibesys-profile"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_profiler_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a profiler name (letters, digits, '.', '_', '-')")
    return name


class ProfilerConfig(BaseModel):
    """One profiler the site offers to the agent's GPU commands."""

    model_config = STRICT

    command: StrTuple = Field(
        min_length=1,
        description="argv put before the agent's command; '{capture}' is the capture's path "
        "(for example ['nsys', 'profile', '-o', '{capture}']).",
    )
    captures: StrTuple = Field(
        min_length=1,
        description="The files the profiler writes, each '{capture}' plus a suffix (for example "
        "'{capture}.nsys-rep'); brought home verified (size, sha256).",
    )
    env: StrTuple = Field(
        default=(),
        description="NAME=VALUE variables the profiler needs, set in the job's sandbox.",
    )

    @field_validator("command")
    @classmethod
    def _command(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value[0] or CAPTURE in value[0]:
            raise ValueError("the first item must name the profiler's program")
        if not any(CAPTURE in item for item in value):
            raise ValueError("no item names '{capture}': the profile would be written nowhere")
        if any("\0" in item for item in value):
            raise ValueError("an item contains NUL")
        return value

    @field_validator("captures")
    @classmethod
    def _captures(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            rest = item.removeprefix(CAPTURE)
            # A suffix is also a snapshot exclusion: no "/" and no control character.
            unprintable = any(ord(char) < 32 or ord(char) == 127 for char in rest)
            if rest == item or CAPTURE in rest or "/" in rest or unprintable:
                raise ValueError(f"{item!r} must be '{{capture}}' plus a file name suffix (no '/')")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            name, equals, text = item.partition("=")
            if not equals or not _VARIABLE.fullmatch(name) or "\0" in text:
                raise ValueError(f"{name or item!r}: write each variable as 'NAME=VALUE'")
        return value

    def argv(
        self, command: tuple[str, ...], capture: str = f"{CAPTURE_DIR}/{CAPTURE_STEM}"
    ) -> tuple[str, ...]:
        """The profiler's argv around the agent's `command`, writing to `capture`."""
        return (*(item.replace(CAPTURE, capture) for item in self.command), *command)

    def capture_names(self, stem: str = CAPTURE_STEM) -> tuple[str, ...]:
        """The captures as artifact patterns, relative to the job's working directory."""
        return tuple(item.replace(CAPTURE, stem) for item in self.captures)

    def variables(self) -> dict[str, str]:
        return dict(item.partition("=")[::2] for item in self.env)
