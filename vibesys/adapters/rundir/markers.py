"""Reading what a Slurm job leaves in its run directory (`exit_code`, `setup_failed`, `claim`)
for many jobs at once: as plain file reads when the cluster's files are this host's, else in
one remote command, which a status round over SSH shares with its squeue (one round trip).

The remote script uses only shell builtins per directory (`read`, `printf`), so a round over a
thousand jobs starts no process per job. Its output is one line per directory,
"<dir>\\t<exit_code>\\t<setup_failed>\\t<claim>", the claim's lines each ended by \\037 (a
claim never holds a tab or that byte).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vibesys.adapters.rundir.claim import Claim, parse_claim
from vibesys.adapters.rundir.names import CLAIM_FILE, EXIT_CODE_FILE, SETUP_FAILED_FILE

__all__ = ["ROUND_SPLIT", "Markers", "parse_markers", "read_here", "round_script"]

#: The line between squeue's output and the markers in a round's combined output (squeue
#: never prints a line that starts with a dash).
ROUND_SPLIT = "-- vibesys markers --"

_READ_MARKERS = (
    "us=$(printf '\\037')\n"
    'for d in "$@"; do\n'
    "  c= s= k= l=\n"
    f'  [ -r "$d/{EXIT_CODE_FILE}" ] && IFS= read -r c < "$d/{EXIT_CODE_FILE}"\n'
    f'  [ -r "$d/{SETUP_FAILED_FILE}" ] && IFS= read -r s < "$d/{SETUP_FAILED_FILE}"\n'
    f'  if [ -r "$d/{CLAIM_FILE}" ]; then\n'
    '    while IFS= read -r l || [ -n "$l" ]; do k="$k$l$us"; l=; done < "$d/' + CLAIM_FILE + '"\n'
    "  fi\n"
    '  printf "%s\\t%s\\t%s\\t%s\\n" "$d" "$c" "$s" "$k"\n'
    "done\n"
    "exit 0\n"
)


@dataclass
class Markers:
    """What was read of each job's markers, by job name."""

    read: set[str] = field(default_factory=set)
    codes: dict[str, int] = field(default_factory=dict)
    setup_failed: dict[str, int] = field(default_factory=dict)
    claims: dict[str, Claim] = field(default_factory=dict)

    def update(self, other: Markers) -> None:
        self.read |= other.read
        self.codes |= other.codes
        self.setup_failed |= other.setup_failed
        self.claims |= other.claims

    def only(self, names: Iterable[str]) -> Markers:
        """The part of what was read that concerns `names`."""
        wanted = set(names) & self.read
        return Markers(
            wanted,
            {n: v for n, v in self.codes.items() if n in wanted},
            {n: v for n, v in self.setup_failed.items() if n in wanted},
            {n: v for n, v in self.claims.items() if n in wanted},
        )

    def add(self, name: str, code: str, setup: str, claim_text: str) -> None:
        self.read.add(name)
        claim = parse_claim(claim_text)
        if claim is not None:
            self.claims[name] = claim
        if setup.strip().isdigit():
            self.setup_failed[name] = int(setup.strip())
        elif code.strip().lstrip("-").isdigit():
            self.codes[name] = int(code.strip())


def round_script(squeue: Sequence[str]) -> str:
    """The `sh -c` program of a status round over a remote transport: `squeue` (its status
    is the program's when it fails), the split line, then the markers of the directories
    given as arguments."""
    return f'{shlex.join(squeue)} || exit $?\nprintf "%s\\n" "{ROUND_SPLIT}"\n{_READ_MARKERS}'


def parse_markers(text: str, dirs: Mapping[str, str]) -> Markers:
    """The script's output; `dirs` maps each directory to its job's name."""
    markers = Markers()
    for line in text.splitlines():
        directory, _, rest = line.partition("\t")
        if directory not in dirs:
            continue
        code, _, rest = rest.partition("\t")
        setup, _, claim_text = rest.partition("\t")
        markers.add(dirs[directory], code, setup, claim_text.replace("\037", "\n"))
    return markers


def read_here(dirs: Mapping[str, str]) -> Markers:
    """The markers of `dirs` read as this host's files (no command to start)."""
    markers = Markers()
    for directory, name in dirs.items():
        markers.add(
            name,
            _first_line(Path(directory, EXIT_CODE_FILE)),
            _first_line(Path(directory, SETUP_FAILED_FILE)),
            _text(Path(directory, CLAIM_FILE)),
        )
    return markers


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _first_line(path: Path) -> str:
    return _text(path).partition("\n")[0]
