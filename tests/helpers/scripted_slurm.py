"""A Runner answering a Slurm status round from fixed text, as a remote transport would: the
round's one command (squeue, then the remote attempt directories' markers after the split line,
in the marker script's form), sacct, and anything else with nothing. For status tests that need
no cluster."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vibesys.adapters.rundir.markers import ROUND_SPLIT
from vibesys.adapters.transports import CommandResult


class ScriptedSlurm:
    def __init__(
        self, squeue: str, sacct: str = "", markers: Mapping[str, Mapping[str, str]] | None = None
    ) -> None:
        """`markers`: the text of each file (`claim`, `exit_code`, ...) by remote attempt dir."""
        self.squeue, self.sacct, self.markers = squeue, sacct, markers or {}
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
            dirs = argv[argv.index("vibesys-round") + 1 :]
            out = f"{self.squeue}{ROUND_SPLIT}\n{marker_output(dirs, self.markers)}"
            return CommandResult(0, out, "", tuple(argv))
        self.calls.append(list(argv))
        return CommandResult(0, self.sacct if argv[0] == "sacct" else "", "", tuple(argv))


def marker_output(dirs: Sequence[str], files: Mapping[str, Mapping[str, str]]) -> str:
    """What the marker script (`rundir/markers.py`) prints for `dirs` holding `files`."""
    lines = []
    for index, directory in enumerate(dirs, 1):
        for name, text in files.get(directory, {}).items():
            lines.append(f"{index} {name}")
            lines += [f"{index} {name}|{line}" for line in text.split("\n")[:-1]]
        lines.append(str(index))
    return "".join(f"{line}\n" for line in lines)
