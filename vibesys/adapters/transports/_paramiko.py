"""paramiko for the `ssh` transport modules, imported at first use.

A process whose commands all go through the host's shared connection (`ssh_share`) never logs
in itself, so it never needs paramiko (about 0.15 s of CPU to import, much of `vibesys run`
over SSH). The modules name `paramiko` as usual; the name is a stand-in that imports paramiko
the first time an attribute is read. `raised(name)` is for `except` clauses: before paramiko
is imported none of its exceptions can have been raised, so it gives a class nothing raises
rather than import paramiko to find out.

paramiko imports the `invoke` package at start-up (~70 ms here) only to run `Match exec` lines
of OpenSSH client config files, which vibesys never reads (it takes its settings from
slurm.toml). Unless something imported invoke already, a None entry in `sys.modules` makes
that optional import fail at once, as paramiko allows.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

__all__ = ["loaded", "paramiko", "raised"]


def loaded() -> bool:
    return "paramiko" in sys.modules and sys.modules["paramiko"] is not None


def _load() -> Any:
    sys.modules.setdefault("invoke", None)  # type: ignore[arg-type]
    return importlib.import_module("paramiko")


class _Paramiko:
    """The paramiko module, imported when first used."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_load(), name)


class _NeverRaised(Exception):
    """Stands for a paramiko exception while paramiko is not imported."""


def raised(name: str) -> Any:
    """paramiko's exception class `name` if paramiko is imported, else one nothing raises."""
    if not loaded():
        return _NeverRaised
    return getattr(sys.modules["paramiko"], name)


paramiko: Any = _Paramiko()
