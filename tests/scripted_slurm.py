"""A Runner answering a Slurm status round from fixed text, as a remote transport would: the
round's one command (squeue, then the run directories' markers after the split line), sacct,
and anything else with nothing. For status tests that need no cluster."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vibesys.adapters.rundir.markers import ROUND_SPLIT
from vibesys.adapters.transports import CommandResult


class ScriptedSlurm:
    def __init__(self, squeue: str, sacct: str = "", markers: str = "") -> None:
        """`markers`: the marker script's lines ("dir\\tcode\\tsetup\\tclaim")."""
        self.squeue, self.sacct, self.markers = squeue, sacct, markers
        #: each command's argv, the round's as ["squeue"]
        self.calls: list[list[str]] = []

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = None,
        maybe_effect: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        if argv[0] == "sh" and "vibesys-round" in argv:
            self.calls.append(["squeue"])
            out = f"{self.squeue}{ROUND_SPLIT}\n{self.markers}"
            return CommandResult(0, out, "", tuple(argv))
        self.calls.append(list(argv))
        return CommandResult(0, self.sacct if argv[0] == "sacct" else "", "", tuple(argv))
