"""The one reader of what a job leaves in its remote attempt directory (`exit_code`,
`setup_failed`, `claim`, `refused`, and when the exit code was written), for many directories
at once: as plain file reads when the cluster's files are this host's, else in one remote
command. A Slurm status round over SSH shares that command with its squeue (one round trip);
SkyPilot runs it alone on the login node, once a round.

The remote script uses only shell builtins per directory (`[`, `read`, `printf`), so a round
over a thousand jobs starts no process per job. It copies each line of each file verbatim
behind a prefix, so no text needs escaping (a line holds no newline; tabs and any other byte
pass through), and names each directory by its position among the arguments, so a directory's
name may hold anything:

    <i> <file>          directory i (1-based) holds <file>
    <i> <file>|<line>   one line of it
    <i>                 directory i was read (after its files: an answer cut short shows)

The exit code's written time is optional. When asked for (`times=True`), one GNU `find` (as
on every Linux login node) prints `@<epoch> <path>` for the directories that hold one. Without
it (or with a find that has no `-printf`) nothing is printed, the time is None and the caller
does without it; so it is for a directory whose name holds a newline.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from msgspec import Struct

from vibesys.adapters.rundir.claim import Claim, parse_claim
from vibesys.adapters.rundir.names import (
    CLAIM_FILE,
    EXIT_CODE_FILE,
    REFUSED_FILE,
    SETUP_FAILED_FILE,
)

__all__ = [
    "NO_MARKERS",
    "ROUND_SPLIT",
    "DirState",
    "parse_markers",
    "read_here",
    "read_script",
    "round_script",
]

#: The line between squeue's output and the markers in a round's combined output (squeue
#: never prints a line that starts with a dash).
ROUND_SPLIT = "-- vibesys markers --"

_FILES: Final = (EXIT_CODE_FILE, SETUP_FAILED_FILE, CLAIM_FILE, REFUSED_FILE)

_READ: Final = (
    "i=0\n"
    'for d in "$@"; do\n'
    "  i=$((i + 1))\n"
    f"  for f in {' '.join(_FILES)}; do\n"
    '    [ -r "$d/$f" ] || continue\n'
    '    printf "%s %s\\n" "$i" "$f"\n'
    '    while IFS= read -r l || [ -n "$l" ]; do printf "%s %s|%s\\n" "$i" "$f" "$l"; l=; done'
    ' < "$d/$f"\n'
    "  done\n"
    '  printf "%s\\n" "$i"\n'
    "done\n"
)
# One process for every directory; without GNU find (or its -printf) it prints nothing.
_TIMES: Final = (
    '[ $# -gt 0 ] && find -H "$@" -mindepth 1 -maxdepth 1'
    f" -name {EXIT_CODE_FILE} -printf '@%T@ %p\\n' 2>/dev/null\n"
)
_NUMBER: Final = re.compile(r"-?[0-9]+")
_DIGITS: Final = re.compile(r"[0-9]+")
_EPOCH: Final = re.compile(r"[0-9]+(\.[0-9]*)?")


class DirState(Struct, frozen=True):
    """What a remote attempt directory says about its attempt.

    `exit_code` is the command's: None when setup failed, since the command never ran (a
    Slurm wrapper then records the setup's SETUP_FAILED_EXIT as the exit code)."""

    claim: Claim | None
    exit_code: int | None
    refused: str | None
    setup_failed: int | None
    #: When the wrapper wrote the exit code (epoch seconds, whole): the command's end by its
    #: own account. None when not asked for, or the host could not tell.
    exit_written_at: float | None = None

    def describe(self) -> str:
        parts = []
        if self.claim is not None:
            parts.append(f"claim kind={self.claim.kind}")
        if self.exit_code is not None:
            parts.append(f"exit_code={self.exit_code}")
        if self.refused is not None:
            parts.append("refused")
        if self.setup_failed is not None:
            parts.append(f"setup_failed={self.setup_failed}")
        return ", ".join(parts) or "no claim, no marker"


#: A directory that holds none of the files (or was not read).
NO_MARKERS: Final = DirState(None, None, None, None)


def read_script(*, times: bool) -> str:
    """The `sh -c` program that reads the directories given as arguments."""
    return _READ + (_TIMES if times else "") + "exit 0\n"


def round_script(squeue: Sequence[str]) -> str:
    """The `sh -c` program of a Slurm status round over a remote transport: `squeue` (its
    status is the program's when it fails), the split line, then the markers of the
    directories given as arguments."""
    split = f'printf "%s\\n" "{ROUND_SPLIT}"'
    return f"{shlex.join(squeue)} || exit $?\n{split}\n{read_script(times=False)}"


def parse_markers(text: str, dirs: Mapping[str, str]) -> dict[str, DirState]:
    """The script's output (`dirs`: each directory, in argument order, to its job's name): the
    state of every directory it read, by job name. A directory missing was not read."""
    order = list(dirs.items())
    exit_paths = {f"{d}/{EXIT_CODE_FILE}": d for d in dirs}
    pending: dict[int, dict[str, list[str]]] = {}
    done: dict[int, dict[str, list[str]]] = {}
    written: dict[str, float] = {}
    for line in text.split("\n"):
        if line.startswith("@"):
            epoch, _, path = line[1:].partition(" ")
            if path in exit_paths and _EPOCH.fullmatch(epoch):
                written[exit_paths[path]] = float(epoch.partition(".")[0])
            continue
        head, bar, content = line.partition("|")
        index, _, name = head.partition(" ")
        if not _DIGITS.fullmatch(index) or not 0 < int(index) <= len(order):
            continue
        files = pending.setdefault(int(index), {})
        if not name and not bar:
            done[int(index)] = files
        elif name in _FILES:
            lines = files.setdefault(name, [])
            if bar:
                lines.append(content)
    states = {}
    for position, files in done.items():
        directory, job_name = order[position - 1]
        states[job_name] = _state(files, written.get(directory))
    return states


def read_here(dirs: Mapping[str, str], *, times: bool = False) -> dict[str, DirState]:
    """The state of every directory of `dirs` read as this host's files (no command to
    start), by job name."""
    states = {}
    for directory, job_name in dirs.items():
        read = {name: _lines(Path(directory, name)) for name in _FILES}
        at = _written(Path(directory, EXIT_CODE_FILE)) if times else None
        states[job_name] = _state({k: v for k, v in read.items() if v is not None}, at)
    return states


def _state(files: Mapping[str, list[str]], written: float | None) -> DirState:
    def text(name: str) -> str | None:
        lines = files.get(name)
        return None if lines is None else "".join(f"{line}\n" for line in lines)

    setup = _number(files.get(SETUP_FAILED_FILE))
    return DirState(
        claim=parse_claim(text(CLAIM_FILE) or ""),
        exit_code=_number(files.get(EXIT_CODE_FILE)) if setup is None else None,
        refused=text(REFUSED_FILE),
        setup_failed=setup,
        exit_written_at=written,
    )


def _number(lines: list[str] | None) -> int | None:
    value = lines[0].strip() if lines else ""
    return int(value) if _NUMBER.fullmatch(value) else None


def _lines(path: Path) -> list[str] | None:
    """The file's lines as the script's `read` sees them (no newline translation, NUL bytes
    dropped as shells drop them), None when it cannot be read."""
    try:
        text = path.read_bytes().replace(b"\0", b"").decode("utf-8", "replace")
    except OSError:
        return None
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def _written(path: Path) -> float | None:
    try:
        return float(os.stat(path).st_mtime_ns // 1_000_000_000)
    except OSError:
        return None
