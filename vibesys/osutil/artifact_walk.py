"""Declared artifacts found by one rule wherever the job ran: a walk of the job's directory
through descriptors that never follows a link (so a loop of directory links cannot be walked,
not merely detected), each relative path matched against the declared globs, bounded in
entries walked and seconds spent, and every file's size checked against the limits before a
byte of it is read (a sparse file counts by its length: it is refused, not copied).

Globs are matched a component at a time: `*`, `?` and `[...]` within one name, `**` as a whole
component for any number of directories (none included). As with Python's glob, a name that
starts with "." is matched only by a component that starts with "." (`**` skips hidden
directories). Only regular files are artifacts; links, devices and FIFOs never match.

Standalone on purpose (standard library only, Python 3.6+, annotations as strings): the
listing program that runs where the job ran is this module's text with beneath.py's in place of
its import line (`vibesys.adapters.rundir.listing.LIST_SCRIPT`); `python3 -c SCRIPT BASE
LIMITS PATTERN...` prints the listing as JSON. The local bridge calls `collect()` in process.
"""

import fnmatch
import hashlib
import json
import os
import re
import stat
import sys
import time
from typing import TYPE_CHECKING, Any, NamedTuple

# Imported when vibesys imports this module; `listing_script()` sends beneath.py's own text in
# place of this line, so the node walks by the same rules.
from vibesys.osutil.beneath import Changed, open_dir, open_file, open_root

#: Bytes read per call.
CHUNK = 1 << 20
#: Directories nested deeper are not walked (each level holds a descriptor while it is).
MAX_DEPTH = 64

if TYPE_CHECKING:  # the node's Python 3.6 cannot subscript the builtin types
    from collections.abc import Callable, Generator

    #: (a pattern's index, the index of its component the next name must match)
    State = tuple[int, int]
    #: a pattern's components: None for `**`, else (its regex, whether it names hidden files)
    Parts = list[Any]
    #: reads one opened file: (its descriptor, its relative path, the most bytes it may have)
    #: to (its size, its sha256), raising TooBig when more came
    Take = Callable[[int, str, int], tuple[int, str]]


class Limits(NamedTuple):
    """An evaluation's artifact limits (the defaults are documented in docs/bridge.md)."""

    #: bytes of one artifact, by its length (a sparse file's holes count)
    max_file_bytes: int = 1 << 30
    #: bytes of all of an evaluation's artifacts together
    max_total_bytes: int = 4 << 30
    #: directory entries the walk looks at, over all patterns
    max_entries: int = 100_000
    #: seconds the walk may take (reading the files matched aside)
    max_seconds: float = 30.0

    def argument(self) -> str:
        """The limits as the listing program's one argument."""
        return ",".join(str(value) for value in self)

    @classmethod
    def parse(cls, text: str) -> "Limits":
        a, b, c, d = text.split(",")
        return cls(int(a), int(b), int(c), float(d))


class TooBig(Exception):
    """A file grew past its budget while it was read."""


class Walk:
    """The regular files below a directory descriptor that match the patterns, each yielded as
    (its directory's descriptor, its name, its relative path) while that descriptor is open.
    `matched[i]`: pattern i matched a file; `stopped`: why the walk ended early, or None."""

    def __init__(self, patterns: "list[str]", max_entries: int, max_seconds: float) -> None:
        self.compiled = [_compile(p) for p in patterns]
        self.matched = [False] * len(patterns)
        self.stopped = None  # type: str | None
        self.entries = 0
        self.max_entries = max_entries
        self.max_seconds = max_seconds

    def files(self, top: int) -> "Generator[tuple[int, str, str], None, None]":
        start = self._closure({(p, 0) for p, parts in enumerate(self.compiled) if parts})
        # Only the walk's own time counts: the caller reads each file between two yields.
        spent, resumed = 0.0, time.monotonic()
        stack = []  # type: list[tuple[int, str, frozenset[State], list[str]]]
        names = sorted(os.listdir(top), reverse=True)
        stack.append((os.dup(top), "", start, names))
        try:
            while stack:
                fd, parent, states, names = stack[-1]
                if not names:
                    os.close(stack.pop()[0])
                    continue
                name = names.pop()
                self.entries += 1
                if self.entries > self.max_entries:
                    self.stopped = f"the walk stopped at its limit of {self.max_entries} entries"
                    return
                if spent + time.monotonic() - resumed > self.max_seconds:
                    self.stopped = f"the walk stopped at its limit of {self.max_seconds:g} seconds"
                    return
                into, hits = self._advance(states, name)
                if not into and not hits:
                    continue
                relative = parent + "/" + name if parent else name
                try:
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    continue  # gone since the listing: nothing to collect
                if stat.S_ISDIR(info.st_mode) and into:
                    if len(stack) > MAX_DEPTH:
                        self.stopped = f"the walk stopped at {MAX_DEPTH} nested directories"
                        return
                    try:  # a directory swapped for a link since its stat fails here
                        child = open_dir(fd, name, relative)
                    except OSError:
                        continue
                    try:
                        listed = sorted(os.listdir(child), reverse=True)
                    except OSError:
                        os.close(child)
                        continue
                    stack.append((child, relative, into, listed))
                elif stat.S_ISREG(info.st_mode) and hits:
                    for p in hits:
                        self.matched[p] = True
                    spent += time.monotonic() - resumed
                    yield fd, name, relative
                    resumed = time.monotonic()
        finally:
            for frame in stack:
                os.close(frame[0])

    def _advance(
        self, states: "frozenset[State]", name: str
    ) -> "tuple[frozenset[State], set[int]]":
        """The states a directory `name` leads to, and the patterns a file `name` completes."""
        hidden = name.startswith(".")
        into, hits = set(), set()  # type: set[State], set[int]
        for p, i in states:
            parts = self.compiled[p]
            part, last = parts[i], i == len(parts) - 1
            if part is None:  # `**`: any number of (visible) directories
                if hidden:
                    continue
                into.add((p, i))
                if last:
                    hits.add(p)
            elif part[0].match(name) and (part[1] or not hidden):
                if last:
                    hits.add(p)
                else:
                    into.add((p, i + 1))
        return self._closure(into), hits

    def _closure(self, states: "set[State]") -> "frozenset[State]":
        """`states` with every `**` also matching no directory at all."""
        todo, done = list(states), set()  # type: list[State], set[State]
        while todo:
            p, i = todo.pop()
            if (p, i) in done:
                continue
            done.add((p, i))
            parts = self.compiled[p]
            if parts[i] is None and i + 1 < len(parts):
                todo.append((p, i + 1))
        return frozenset(done)


def _compile(pattern: str) -> "Parts":
    """A pattern's components: None for `**`, else (its regex, whether it names hidden files)."""
    parts = []  # type: Parts
    for part in pattern.split("/"):
        if part in ("", "."):
            continue
        if part == "**":
            if not parts or parts[-1] is not None:
                parts.append(None)
            continue
        parts.append((re.compile(fnmatch.translate(part)), part.startswith(".")))
    return parts


def hash_only(fd: int, relative: str, budget: int) -> "tuple[int, str]":
    digest, size = hashlib.sha256(), 0
    while True:
        chunk = os.read(fd, CHUNK)
        if not chunk:
            return size, digest.hexdigest()
        size += len(chunk)
        if size > budget:
            raise TooBig(relative)
        digest.update(chunk)


def collect(
    base: str, patterns: "list[str]", limits: Limits, take: "Take" = hash_only
) -> "dict[str, list[Any]]":
    """`{"found": [{path, size, sha256}], "refused": [{path, size, why}], "missing": [pattern]}`
    for the files below `base` that match `patterns`; each file within the limits is opened
    once, never through a link, and read by `take`."""
    found, refused = [], []  # type: list[dict[str, Any]], list[dict[str, Any]]
    total = 0
    walk = Walk(patterns, limits.max_entries, limits.max_seconds)
    try:
        top = open_root(base)
    except Changed:  # no directory (the job never made it): nothing matches
        return {"found": [], "refused": [], "missing": list(patterns)}
    files = walk.files(top)
    try:
        for parent, name, relative in files:
            try:
                fd, info = open_file(parent, name, relative)
            except OSError as exc:
                refused.append({"path": relative, "size": 0, "why": f"could not be opened: {exc}"})
                continue
            try:
                # By its length, before a byte is read: a sparse file is refused unread.
                over = _over(info.st_size, total, limits)
                if over is None:
                    budget = min(limits.max_file_bytes, limits.max_total_bytes - total)
                    try:
                        size, digest = take(fd, relative, budget)
                    except TooBig:
                        over = f"grew past {budget} bytes, its share of the limits, as it was read"
                if over is not None:
                    refused.append({"path": relative, "size": info.st_size, "why": over})
                    continue
                total += size
                found.append({"path": relative, "size": size, "sha256": digest})
            finally:
                os.close(fd)
    finally:
        files.close()
        os.close(top)
    missing = [p for i, p in enumerate(patterns) if not walk.matched[i]]
    if walk.stopped is not None:  # what it did not reach is neither found nor missing
        why = walk.stopped + ": files beyond it were not collected"
        refused.extend({"path": p, "size": 0, "why": why} for p in patterns)
        missing = []
    return {"found": found, "refused": refused, "missing": missing}


def _over(size: int, total: int, limits: Limits) -> "str | None":
    if size > limits.max_file_bytes:
        return f"{size} bytes, over the limit of {limits.max_file_bytes} bytes per artifact"
    if total + size > limits.max_total_bytes:
        cap = limits.max_total_bytes
        return f"{size} bytes would take the evaluation's artifacts over {cap} bytes"
    return None


def _main(argv: "list[str]") -> int:
    listing = collect(argv[0], argv[2:], Limits.parse(argv[1]))
    sys.stdout.write(json.dumps(listing))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
