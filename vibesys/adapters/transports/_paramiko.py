"""paramiko, imported for the `ssh` transport modules.

paramiko imports the `invoke` package at start-up (~70 ms here) only to run `Match exec` lines
of OpenSSH client config files, which vibesys never reads (it takes its settings from
slurm.toml). Unless something imported invoke already, a None entry in `sys.modules` makes
that optional import fail at once, as paramiko allows."""

from __future__ import annotations

import sys

sys.modules.setdefault("invoke", None)  # type: ignore[arg-type]

import paramiko  # type: ignore[import-untyped]  # noqa: E402

__all__ = ["paramiko"]
