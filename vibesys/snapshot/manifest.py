"""The manifest of a candidate directory: what goes into its snapshot, what stays out and why,
and the digest that names it."""

from __future__ import annotations

import functools
import hashlib
import os
import stat
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from vibesys.snapshot import _remote
from vibesys.snapshot.errors import CandidateError
from vibesys.snapshot.policy import ExclusionReason, SnapshotPolicy, matcher

__all__ = [
    "MARKER",
    "EntryKind",
    "Excluded",
    "Manifest",
    "ManifestEntry",
    "build_manifest",
    "compute_digest",
    "render_manifest_text",
]

#: The file a staged snapshot holds at its top level besides the candidate (not in the digest).
MARKER: Final = _remote.MARKER
#: Threads hashing files, and the fewest files worth a thread of their own.
_HASH_THREADS: Final = max(2, min(8, os.cpu_count() or 2))
_BATCH: Final = 256


class EntryKind(StrEnum):
    FILE = "file"
    DIRECTORY = "directory"
    SYMLINK = "symlink"


_TYPE_BITS: Final = {
    EntryKind.FILE: stat.S_IFREG,
    EntryKind.DIRECTORY: stat.S_IFDIR,
    EntryKind.SYMLINK: stat.S_IFLNK,
}


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """One entry of the snapshot."""

    #: relative POSIX path, "/" between components, no leading "./"
    path: str
    kind: EntryKind
    #: normalized permission bits: 0o755 or 0o644 for a file (0o755 when the owner may execute
    #: it), 0o755 for a directory, 0o777 for a symbolic link
    mode: int
    #: bytes of content (file), of the target (symbolic link), 0 (directory)
    size: int
    #: hex sha256 of the content, of the link's target, or of nothing (directory)
    sha256: str
    #: a symbolic link's target, verbatim (never followed)
    target: str | None = None

    @property
    def executable(self) -> bool:
        return self.kind is EntryKind.FILE and self.mode == 0o755

    @property
    def mode_text(self) -> str:
        """MODE as the digest encodes it: `100644`, `100755`, `040755` or `120777`."""
        return format(_TYPE_BITS[self.kind] | self.mode, "06o")


@dataclass(frozen=True, slots=True)
class Excluded:
    """An entry left out of the snapshot, and why (for `vibesys snapshot --dry-run`)."""

    #: relative POSIX path (a name that is not UTF-8 holds surrogate escapes)
    path: str
    #: None for a FIFO, socket or device
    kind: EntryKind | None
    reason: ExclusionReason
    #: the pattern that matched, the size against the limit, or the link's target
    detail: str


@dataclass(frozen=True)
class Manifest:
    """A candidate's entries in digest order, and what was left out. Pure data: it does not
    remember where the candidate is."""

    entries: tuple[ManifestEntry, ...]
    excluded: tuple[Excluded, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.entries, key=lambda entry: entry.path.encode("utf-8")))
        if len({entry.path for entry in ordered}) != len(ordered):
            raise ValueError("a manifest lists each path once")
        object.__setattr__(self, "entries", ordered)

    @functools.cached_property
    def digest(self) -> str:
        """The snapshot's name: see `compute_digest`."""
        return compute_digest(self.entries)

    @property
    def total_bytes(self) -> int:
        """Bytes of file content in the snapshot."""
        return sum(entry.size for entry in self.entries if entry.kind is EntryKind.FILE)

    def count(self, kind: EntryKind) -> int:
        return sum(1 for entry in self.entries if entry.kind is kind)


def compute_digest(entries: Iterable[ManifestEntry]) -> str:
    """sha256 over `vibesys-snapshot-v1` NUL, then `PATH NUL MODE NUL HASH NUL` for every entry
    in ascending order of its path's UTF-8 bytes (MODE as `ManifestEntry.mode_text`, HASH as
    `ManifestEntry.sha256`), as 64 lowercase hex digits. The remote verifier computes the same
    over the directory it is given (see `_remote.py`)."""
    return _remote.digest_of(
        [(entry.path.encode("utf-8"), entry.mode_text, entry.sha256) for entry in entries]
    )


def build_manifest(root: str | os.PathLike[str], policy: SnapshotPolicy | None = None) -> Manifest:
    """Walk the candidate directory `root` (the working tree as it is, uncommitted changes
    included) and list what its snapshot holds. Symbolic links are recorded, never followed;
    the top directory itself may be one. Raises CandidateError when `root` is not a readable
    directory or changes while it is read."""
    policy = policy or SnapshotPolicy()
    base = os.fspath(root)
    try:
        if not stat.S_ISDIR(os.stat(base).st_mode):
            raise CandidateError(f"candidate {base!r} is not a directory")
    except OSError as exc:
        raise CandidateError(f"candidate {base!r}: {exc.strerror or exc}") from exc
    walk = _Walk(base, policy)
    walk.run()
    return Manifest(tuple(walk.entries + walk.hash_files()), tuple(walk.sorted_excluded()))


class _Walk:
    def __init__(self, base: str, policy: SnapshotPolicy) -> None:
        self.base = base
        self.real = os.path.realpath(base)
        self.policy = policy
        self.rules = matcher(policy)
        self.entries: list[ManifestEntry] = []
        self.excluded: list[Excluded] = []
        #: (relative path, mode) of regular files still to hash
        self.files: list[tuple[str, int]] = []

    def leave_out(
        self, path: str, kind: EntryKind | None, reason: ExclusionReason, detail: str
    ) -> None:
        self.excluded.append(Excluded(path, kind, reason, detail))

    def run(self) -> None:
        pending = [""]
        while pending:
            prefix = pending.pop()
            try:
                with os.scandir(os.path.join(self.base, prefix)) as listing:
                    found = list(listing)
            except OSError as exc:
                raise CandidateError(f"cannot list {prefix or './'}: {exc.strerror}") from exc
            for entry in found:
                relative = prefix + entry.name
                try:
                    walk = self.visit(relative, entry)
                except OSError as exc:  # it vanished or changed kind while we looked
                    why = exc.strerror or str(exc)
                    raise CandidateError(f"cannot read {relative!r}: {why}") from exc
                if walk:
                    pending.append(relative + "/")

    def visit(self, relative: str, entry: os.DirEntry[str]) -> bool:
        """Record one entry; True when it is a directory to walk."""
        try:
            relative.encode("utf-8")
        except UnicodeEncodeError:
            self.leave_out(relative, None, ExclusionReason.BAD_NAME, "name is not UTF-8")
            return False
        if relative == MARKER:
            self.leave_out(relative, None, ExclusionReason.RESERVED, "the snapshot marker")
            return False
        kind = _kind(entry)
        rule = self.rules.excluded_by(relative, kind is EntryKind.DIRECTORY)
        if rule is not None:
            self.leave_out(relative, kind, rule.reason, f"matches {rule.pattern!r}")
            return False
        if kind is None:
            self.leave_out(relative, None, ExclusionReason.SPECIAL_FILE, "FIFO, socket or device")
        elif kind is EntryKind.DIRECTORY:
            self.entries.append(ManifestEntry(relative, kind, 0o755, 0, _remote.EMPTY_SHA256))
            return True
        elif kind is EntryKind.SYMLINK:
            self.link(relative, entry.path)
        else:
            info = entry.stat(follow_symlinks=False)
            if info.st_size > self.policy.max_file_bytes:
                limit = f"{_size(info.st_size)} over the {_size(self.policy.max_file_bytes)} limit"
                self.leave_out(relative, kind, ExclusionReason.TOO_LARGE, limit)
            else:
                self.files.append((relative, 0o755 if info.st_mode & stat.S_IXUSR else 0o644))
        return False

    def link(self, relative: str, path: str) -> None:
        target = os.readlink(path)
        try:
            raw = target.encode("utf-8")
        except UnicodeEncodeError:
            self.leave_out(relative, EntryKind.SYMLINK, ExclusionReason.BAD_NAME, "target")
            return
        if not self.policy.allow_external_symlinks and self.external(relative, target):
            why = f"-> {target!r} leaves the candidate"
            self.leave_out(relative, EntryKind.SYMLINK, ExclusionReason.EXTERNAL_SYMLINK, why)
            return
        sha = hashlib.sha256(raw).hexdigest()
        self.entries.append(
            ManifestEntry(relative, EntryKind.SYMLINK, 0o777, len(raw), sha, target)
        )

    def external(self, relative: str, target: str) -> bool:
        """Whether the link at `relative` ends outside the candidate, resolved the way the
        file system would (through other links), so the digest could not vouch for it."""
        if target.startswith("/"):
            return True
        parent = os.path.dirname(os.path.join(self.real, relative))
        resolved = os.path.realpath(os.path.join(parent, target))
        return os.path.commonpath([self.real, resolved]) != self.real

    def hash_files(self) -> list[ManifestEntry]:
        """Hash the regular files found, in batches on a few threads (file reads and hashlib
        release the GIL): most of a candidate's cost is system calls on small files."""

        def batch(items: list[tuple[str, int]]) -> list[ManifestEntry]:
            buffer = memoryview(bytearray(_remote.CHUNK))
            done = []
            for relative, mode in items:
                try:
                    size, sha = _remote.file_sha256(os.path.join(self.base, relative), buffer)
                except OSError as exc:
                    why = exc.strerror or str(exc)
                    raise CandidateError(f"cannot read {relative!r}: {why}") from exc
                done.append(ManifestEntry(relative, EntryKind.FILE, mode, size, sha))
            return done

        size = max(_BATCH, -(-len(self.files) // _HASH_THREADS))
        batches = [self.files[i : i + size] for i in range(0, len(self.files), size)]
        if len(batches) <= 1:
            return batch(self.files)
        with ThreadPoolExecutor(_HASH_THREADS, thread_name_prefix="vibesys-hash") as pool:
            return [entry for done in pool.map(batch, batches) for entry in done]

    def sorted_excluded(self) -> list[Excluded]:
        return sorted(self.excluded, key=lambda item: os.fsencode(item.path))


def _kind(entry: os.DirEntry[str]) -> EntryKind | None:
    if entry.is_symlink():
        return EntryKind.SYMLINK
    if entry.is_dir(follow_symlinks=False):
        return EntryKind.DIRECTORY
    if entry.is_file(follow_symlinks=False):
        return EntryKind.FILE
    return None


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    value = float(count)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"


def _show(path: str) -> str:
    """A path as one unambiguous line: quoted when it holds anything unprintable."""
    return path if path.isprintable() and path.strip() == path else repr(path)


def render_manifest_text(manifest: Manifest, *, entries: bool = True) -> str:
    """The listing `vibesys snapshot --dry-run` prints: the digest and totals, every included
    entry (unless `entries=False`), then every excluded entry with its reason."""
    nouns = {
        EntryKind.FILE: ("file", "files"),
        EntryKind.DIRECTORY: ("directory", "directories"),
        EntryKind.SYMLINK: ("symlink", "symlinks"),
    }
    counts = ", ".join(
        f"{manifest.count(kind)} {nouns[kind][manifest.count(kind) != 1]}" for kind in EntryKind
    )
    lines = [
        f"snapshot {manifest.digest}",
        f"  {counts}, {_size(manifest.total_bytes)} of content",
    ]
    if entries:
        lines.append(f"included ({len(manifest.entries)}):")
        for entry in manifest.entries:
            name = _show(entry.path)
            if entry.kind is EntryKind.DIRECTORY:
                name += "/"
            elif entry.kind is EntryKind.SYMLINK:
                name += f" -> {_show(entry.target or '')}"
            size = "" if entry.kind is not EntryKind.FILE else _size(entry.size)
            lines.append(f"  {entry.mode_text}  {size:>10}  {entry.sha256[:12]}  {name}")
    lines.append(f"excluded ({len(manifest.excluded)}):")
    width = max((len(item.reason.value) for item in manifest.excluded), default=0)
    for item in manifest.excluded:
        name = _show(item.path) + ("/" if item.kind is EntryKind.DIRECTORY else "")
        lines.append(f"  {item.reason.value:<{width}}  {name}  ({item.detail})")
    return "\n".join(lines) + "\n"
