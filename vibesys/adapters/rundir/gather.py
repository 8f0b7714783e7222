"""A whole collection in one remote command: the rest of both logs from their spooled
offsets, the exit code marker, and the declared artifacts' listing, framed on one stream.
Over SSH a job's collection is then this one command plus the artifacts' downloads.

The stream is parts, each `vibesys-part NAME SIZE\\n` then exactly SIZE bytes, and ends with
`vibesys-end\\n`. A log's part carries the bytes its file had beyond the offset when it was
measured (the job has ended: nothing writes to it any more, and `head -c` caps it if
something still did). A stream that does not end as announced is garbled, and nothing of it
may be trusted: the caller keeps its spooled offsets, so the next try reads the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from msgspec import Struct, field

from vibesys.adapters.base import ArtifactInfo, Sink
from vibesys.adapters.rundir.listing import DEFAULT_LIMITS, LIST_SCRIPT, parse_listing
from vibesys.adapters.rundir.names import EXIT_CODE_FILE, STDERR_FILE, STDOUT_FILE, STREAMS
from vibesys.adapters.transports import Runner
from vibesys.errors import BackendUnavailable
from vibesys.osutil.artifact_walk import Limits

__all__ = ["GATHER_SCRIPT", "Gathered", "gather"]


#: `env VIBESYS_LIST=LIST_SCRIPT sh -c GATHER_SCRIPT vibesys-gather ATTEMPT_DIR WORK_DIR
#: STDOUT_OFFSET STDERR_OFFSET LIST_LIMIT LIMITS PATTERN...` (LIMITS: the artifacts' limits,
#: `Limits.argument()`; the listing program travels in the environment, so no shell ever
#: re-parses it). Exit 3: a file could not be read; 4: the listing failed or outlived
#: LIST_LIMIT seconds. The logs' copy has no limit, as when they are read alone (a big log
#: takes its time); the listing, hashing files on a file system that may stall, keeps the
#: limit every other command has (coreutils `timeout`, where there is one).
GATHER_SCRIPT: Final = (
    r"""
d=$1 w=$2 o1=$3 o2=$4 limit=$5 bounds=$6
shift 6
"""
    + f'm="$d/{EXIT_CODE_FILE}"\n'
    + r"""
bounded() {
  if command -v timeout >/dev/null 2>&1; then timeout -k 5 "$limit" "$@"; else "$@"; fi
}
part() { printf 'vibesys-part %s %s\n' "$1" "$2"; }
log() {
  size=0
  [ -f "$d/$1" ] && size=$(($(wc -c < "$d/$1")))
  n=$((size - $2))
  [ "$n" -lt 0 ] && n=0
  part "$1" "$n"
  if [ "$n" -gt 0 ]; then tail -c +"$(($2 + 1))" "$d/$1" | head -c "$n" || exit 3; fi
}
"""
    + f'log {STDOUT_FILE} "$o1"\nlog {STDERR_FILE} "$o2"\n'
    + r"""
if [ -r "$m" ]; then
  part marker "$(($(wc -c < "$m")))"
  cat "$m" || exit 3
fi
if [ $# -gt 0 ]; then
  listing=$(bounded python3 -c "$VIBESYS_LIST" "$w" "$bounds" "$@") || exit 4
  part listing "$(($(printf '%s' "$listing" | wc -c)))"
  printf '%s' "$listing"
fi
printf 'vibesys-end\n'
"""
)


class Gathered(Struct):
    """What one gathering brought: bytes per log (written to the sinks), the marker's text
    (None: there was none), and the listing (None: no patterns were given)."""

    log_bytes: dict[str, int] = field(default_factory=dict)
    marker: str | None = None
    listing: tuple[list[ArtifactInfo], list[str]] | None = None


def gather(
    runner: Runner,
    remote_attempt_dir: str,
    work_dir: str,
    offsets: Mapping[str, int],
    patterns: Sequence[str],
    sinks: Mapping[str, Sink],
    *,
    list_limit: float = 60.0,
    limits: Limits = DEFAULT_LIMITS,
) -> Gathered:
    """Run the gathering; each log's new bytes go to its sink. Raises BackendUnavailable when
    the command fails, the listing outlives `list_limit` seconds, or the stream is garbled
    (the sinks may then hold bytes to discard)."""
    demux = _Demux(sinks)
    argv = [
        "env",
        f"VIBESYS_LIST={LIST_SCRIPT}",
        "sh",
        "-c",
        GATHER_SCRIPT,
        "vibesys-gather",
        remote_attempt_dir,
        work_dir,
        str(offsets.get(STDOUT_FILE, 0)),
        str(offsets.get(STDERR_FILE, 0)),
        f"{list_limit:g}",
        limits.argument(),
        *patterns,
    ]
    result = runner.stream(argv, demux, timeout=None)
    if result.returncode == 4:
        raise BackendUnavailable("listing the artifacts failed", evidence=result.evidence())
    if result.returncode != 0:
        raise BackendUnavailable(
            f"gathering {remote_attempt_dir} failed", evidence=result.evidence()
        )
    return demux.finish()


class _Demux:
    """Splits the framed stream as it arrives: log parts go to their sinks in bounded
    chunks, the small parts are kept."""

    def __init__(self, sinks: Mapping[str, Sink]) -> None:
        self.sinks = sinks
        self.buffer = b""
        self.part: str | None = None
        self.left = 0
        self.kept: dict[str, bytearray] = {}
        self.gathered = Gathered()
        self.ended = False

    def write(self, data: bytes, /) -> int:
        self.buffer += data
        while self.buffer:
            if self.part is not None:
                chunk, self.buffer = self.buffer[: self.left], self.buffer[self.left :]
                self.left -= len(chunk)
                self._take(self.part, chunk)
                if self.left == 0:
                    self.part = None
                continue
            header, newline, rest = self.buffer.partition(b"\n")
            if not newline:
                if len(self.buffer) > 200:
                    raise BackendUnavailable("the gathering's output is garbled")
                break
            self.buffer = rest
            self._header(header.decode("ascii", "replace"))
        return len(data)

    def flush(self) -> None:
        for sink in self.sinks.values():
            sink.flush()

    def _header(self, line: str) -> None:
        words = line.split(" ")
        if self.ended:
            raise BackendUnavailable(f"the gathering's output goes on after its end: {line[:80]!r}")
        if line == "vibesys-end":
            self.ended = True
            return
        if len(words) != 3 or words[0] != "vibesys-part" or not words[2].isdecimal():
            raise BackendUnavailable(f"the gathering's output is garbled: {line[:80]!r}")
        name, size = words[1], int(words[2])
        if name in STREAMS:
            self.gathered.log_bytes[name] = size
        else:
            self.kept[name] = bytearray()
        self.part, self.left = (name, size) if size else (None, 0)

    def _take(self, name: str, chunk: bytes) -> None:
        if name in STREAMS:
            self.sinks[name].write(chunk)
        else:
            self.kept[name] += chunk

    def finish(self) -> Gathered:
        if not self.ended or self.part is not None or self.buffer:
            raise BackendUnavailable("the gathering's output was cut short")
        gathered = self.gathered
        if "marker" in self.kept:
            gathered.marker = self.kept["marker"].decode("utf-8", "replace")
        if "listing" in self.kept:
            gathered.listing = parse_listing(self.kept["listing"].decode("utf-8"))
        return gathered
