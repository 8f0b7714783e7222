"""The manifest of a candidate directory: what goes into its snapshot, what stays out and why,
and the digest that names it."""

from __future__ import annotations

import functools
import stat
from collections.abc import Iterable
from enum import StrEnum
from typing import Final

import msgspec

from vibesys.snapshot import remote_program
from vibesys.snapshot.policy import ExclusionReason, SnapshotPolicy

__all__ = [
    "MARKER",
    "EntryKind",
    "Excluded",
    "Manifest",
    "ManifestEntry",
    "compute_digest",
    "render_manifest_text",
    "size_text",
]

#: The file a staged snapshot holds at its top level besides the candidate (not in the digest).
MARKER: Final = remote_program.MARKER


class EntryKind(StrEnum):
    FILE = "file"
    DIRECTORY = "directory"
    SYMLINK = "symlink"


_TYPE_BITS: Final = {
    EntryKind.FILE: stat.S_IFREG,
    EntryKind.DIRECTORY: stat.S_IFDIR,
    EntryKind.SYMLINK: stat.S_IFLNK,
}


class ManifestEntry(msgspec.Struct, frozen=True):
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


class Excluded(msgspec.Struct, frozen=True):
    """An entry left out of the snapshot, and why (for `vibesys snapshot --dry-run`)."""

    #: relative POSIX path (a name that is not UTF-8 holds surrogate escapes)
    path: str
    #: None for a FIFO, socket or device
    kind: EntryKind | None
    reason: ExclusionReason
    #: the pattern that matched, the size against the limit, or the link's target
    detail: str


# dict=True: room for the digest, computed once when first asked for.
class Manifest(msgspec.Struct, frozen=True, dict=True):
    """A candidate's entries in digest order, and what was left out. Pure data: it does not
    remember where the candidate is."""

    entries: tuple[ManifestEntry, ...]
    excluded: tuple[Excluded, ...] = ()
    #: the policy it was read under: a stage reads the candidate again under the same one
    policy: SnapshotPolicy | None = None

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.entries, key=lambda entry: entry.path.encode("utf-8")))
        if len({entry.path for entry in ordered}) != len(ordered):
            raise ValueError("a manifest lists each path once")
        msgspec.structs.force_setattr(self, "entries", ordered)

    # The entries are the snapshot: what was left out, and why, does not make it another one.
    def __eq__(self, other: object) -> bool:
        return isinstance(other, Manifest) and self.entries == other.entries

    def __hash__(self) -> int:
        return hash(self.entries)

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
    over the directory it is given (see `remote_program.py`)."""
    return remote_program.digest_of(
        [(entry.path.encode("utf-8"), entry.mode_text, entry.sha256) for entry in entries]
    )


def size_text(count: int) -> str:
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
        f"  {counts}, {size_text(manifest.total_bytes)} of content",
    ]
    if entries:
        lines.append(f"included ({len(manifest.entries)}):")
        for entry in manifest.entries:
            name = _show(entry.path)
            if entry.kind is EntryKind.DIRECTORY:
                name += "/"
            elif entry.kind is EntryKind.SYMLINK:
                name += f" -> {_show(entry.target or '')}"
            size = "" if entry.kind is not EntryKind.FILE else size_text(entry.size)
            lines.append(f"  {entry.mode_text}  {size:>10}  {entry.sha256[:12]}  {name}")
    lines.append(f"excluded ({len(manifest.excluded)}):")
    width = max((len(item.reason.value) for item in manifest.excluded), default=0)
    for item in manifest.excluded:
        name = _show(item.path) + ("/" if item.kind is EntryKind.DIRECTORY else "")
        lines.append(f"  {item.reason.value:<{width}}  {name}  ({item.detail})")
    return "\n".join(lines) + "\n"
