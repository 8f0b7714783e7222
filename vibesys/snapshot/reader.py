"""The one reader of a candidate tree: `vibesys snapshot`, the digest recorded at PREPARED and
every stage (local, sbatch, srun, SkyPilot) read the candidate through it, the same way.

Every directory is opened from its parent's descriptor, never through a symbolic link, and
every file once from its directory's descriptor (`vibesys.osutil.beneath`); each file is read
once, from that descriptor, and a stage's sink receives the very bytes that are hashed, so what
is staged is what the digest names. A name that changes kind while the tree is read (a
directory swapped for a link, a file for a directory, ...), vanishes, or changes size while it
is read refuses the snapshot in one line (CandidateError): nothing is ever read through a link
and nothing half-read is staged. A symbolic link's target is judged against the tree as this
walk read it, never by resolving it in the live tree.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from typing import Final, Protocol, TypeVar

from vibesys.osutil import beneath
from vibesys.snapshot import remote_program
from vibesys.snapshot.errors import CandidateError
from vibesys.snapshot.manifest import (
    MARKER,
    EntryKind,
    Excluded,
    Manifest,
    ManifestEntry,
    size_text,
)
from vibesys.snapshot.policy import ExclusionReason, SnapshotPolicy, matcher

__all__ = ["Content", "Sink", "build_manifest", "read_tree", "staged_mode"]

#: Threads hashing files when nothing is staged, the files read before they are started (a
#: small candidate never pays for them), files per task, and tasks in flight (each holds a
#: descriptor of its directory).
_HASH_THREADS: Final = max(2, min(8, os.cpu_count() or 2))
_BATCH: Final = 256
_IN_FLIGHT: Final = 4 * _HASH_THREADS
T = TypeVar("T")
#: Links followed while judging where a link ends (the kernel's own limit).
_MAX_HOPS: Final = 40


def staged_mode(normalized: int, source: int) -> int:
    """The permission bits of a staged copy: the snapshot's normalized mode, never more than
    the source grants to group and others (a 0600 file stays 0600); the owner (the stager)
    keeps what the normalized mode gives it."""
    return normalized & (stat.S_IMODE(source) | 0o700)


class Content:
    """A file's bytes as a sink reads them from the descriptor opened by the walk, hashed and
    counted on the way. `size` is the opened file's size; reading more or fewer bytes than
    that is a change (`finish`)."""

    def __init__(self, fd: int, relative: str, size: int) -> None:
        self.fd = fd
        self.relative = relative
        self.size = size
        self.read_bytes = 0
        self.hash = hashlib.sha256()

    def read(self, count: int = -1, /) -> bytes:
        if count < 0:
            return b"".join(iter(lambda: self.read(remote_program.CHUNK), b""))
        data = os.read(self.fd, count)
        self.hash.update(data)
        self.read_bytes += len(data)
        return data

    def drain(self, buffer: memoryview) -> None:
        while count := os.readv(self.fd, [buffer]):
            self.hash.update(buffer[:count])
            self.read_bytes += count

    def finish(self) -> str:
        """The sha256 of what was read, once it is the whole file as it was opened."""
        if self.read_bytes != self.size or os.read(self.fd, 1):
            raise beneath.Changed(self.relative, "changed while it was read")
        return self.hash.hexdigest()


class Sink(Protocol):
    """Where a stage puts what the walk reads, parents before children (links last)."""

    def directory(self, relative: str, mode: int) -> None: ...

    #: reads `content` to its end (the walk checks that it did)
    def file(self, relative: str, mode: int, content: Content) -> None: ...

    def symlink(self, relative: str, target: str) -> None: ...


def build_manifest(root: str | os.PathLike[str], policy: SnapshotPolicy | None = None) -> Manifest:
    """Walk the candidate directory `root` (the working tree as it is, uncommitted changes
    included) and list what its snapshot holds. Symbolic links are recorded, never followed;
    the top directory itself may be one. Raises CandidateError when `root` is not a readable
    directory or changes while it is read."""
    return read_tree(root, policy or SnapshotPolicy())


def read_tree(
    root: str | os.PathLike[str], policy: SnapshotPolicy, sink: Sink | None = None
) -> Manifest:
    """The manifest of `root` under `policy`, each file read once; with a `sink`, every entry
    also goes to it as it is read (its digest is then the digest of what the sink got)."""
    base = os.fspath(root)
    try:
        if not stat.S_ISDIR(os.stat(base).st_mode):
            raise CandidateError(f"candidate {base!r} is not a directory")
        top = beneath.open_root(base)  # the top is the caller's to name: it may be a link
    except beneath.Changed as exc:
        raise CandidateError(f"candidate {base!r} {exc.why}") from None
    except OSError as exc:
        raise CandidateError(f"candidate {base!r}: {exc.strerror or exc}") from exc
    walk = _Walk(policy, sink)
    try:
        walk.run(top)
    except beneath.Changed as exc:
        raise CandidateError(f"the candidate changed while it was read: {exc}") from None
    return Manifest(tuple(walk.entries), tuple(walk.sorted_excluded()), policy=policy)


class _Walk:
    def __init__(self, policy: SnapshotPolicy, sink: Sink | None) -> None:
        self.policy = policy
        self.rules = matcher(policy)
        self.sink = sink
        self.entries: list[ManifestEntry] = []
        self.excluded: list[Excluded] = []
        #: every link read, by path: judged once the whole tree is known
        self.links: dict[str, str] = {}
        self.read_inline = 0

    def leave_out(
        self, path: str, kind: EntryKind | None, reason: ExclusionReason, detail: str
    ) -> None:
        self.excluded.append(Excluded(path, kind, reason, detail))

    def run(self, top: int) -> None:
        """Depth first, one descriptor per level held: a directory is listed and its files
        read before its subdirectories are entered."""
        with ExitStack() as cleanup:
            pool = _Pool(cleanup) if self.sink is None else None
            stack: list[tuple[int, str, Iterator[str]]] = []
            cleanup.callback(_close_all, stack)
            stack.append((top, "", iter(())))
            stack[-1] = (top, "", iter(self.read_directory(top, "", pool)))
            while stack:
                fd, prefix, subdirectories = stack[-1]
                name = next(subdirectories, None)
                if name is None:
                    stack.pop()
                    os.close(fd)
                    continue
                relative = prefix + name
                child = _opened(relative, beneath.open_dir, fd, name)
                try:
                    mode = os.fstat(child).st_mode
                    self.entries.append(
                        ManifestEntry(
                            relative, EntryKind.DIRECTORY, 0o755, 0, remote_program.EMPTY_SHA256
                        )
                    )
                    if self.sink is not None:
                        self.sink.directory(relative, staged_mode(0o755, mode))
                    listed = iter(self.read_directory(child, relative + "/", pool))
                except BaseException:
                    os.close(child)
                    raise
                stack.append((child, relative + "/", listed))
            if pool is not None:
                for found, left_out in pool.results():
                    self.entries += found
                    self.excluded += left_out
        self.judge_links()

    def read_directory(self, fd: int, prefix: str, pool: _Pool | None) -> list[str]:
        """Record the entries of the directory `fd` (at `prefix`) and read its files; the
        names of its subdirectories to walk."""
        try:
            with os.scandir(fd) as listing:
                found = sorted(listing, key=lambda entry: os.fsencode(entry.name))
        except OSError as exc:
            raise CandidateError(f"cannot list {prefix or './'}: {exc.strerror}") from exc
        subdirectories: list[str] = []
        files: list[str] = []
        for entry in found:
            relative = prefix + entry.name
            kind = self.classify(relative, entry)
            if kind is EntryKind.DIRECTORY:
                subdirectories.append(entry.name)
            elif kind is EntryKind.FILE:
                files.append(entry.name)
            elif kind is EntryKind.SYMLINK:
                self.links[relative] = self.readlink(fd, entry.name, relative)
        if pool is not None and self.read_inline >= _BATCH:
            for start in range(0, len(files), _BATCH):
                pool.submit(fd, prefix, files[start : start + _BATCH], self.policy)
        else:
            self.read_inline += len(files)
            found_files, left_out = _read_files(fd, prefix, files, self.policy, self.sink)
            self.entries += found_files
            self.excluded += left_out
        return subdirectories

    def classify(self, relative: str, entry: os.DirEntry[str]) -> EntryKind | None:
        """The kind of an entry to read (None: left out, and listed why)."""
        try:
            relative.encode("utf-8")
        except UnicodeEncodeError:
            self.leave_out(relative, None, ExclusionReason.BAD_NAME, "name is not UTF-8")
            return None
        if relative == MARKER:
            self.leave_out(relative, None, ExclusionReason.RESERVED, "the snapshot marker")
            return None
        try:
            kind = _kind(entry)
        except OSError as exc:
            raise beneath.Changed(relative, "vanished") from exc
        rule = self.rules.excluded_by(relative, kind is EntryKind.DIRECTORY)
        if rule is not None:
            self.leave_out(relative, kind, rule.reason, f"matches {rule.pattern!r}")
            return None
        if kind is None:
            self.leave_out(relative, None, ExclusionReason.SPECIAL_FILE, "FIFO, socket or device")
        return kind

    @staticmethod
    def readlink(fd: int, name: str, relative: str) -> str:
        try:
            return os.readlink(name, dir_fd=fd)
        except OSError as exc:  # EINVAL: it is no longer a link
            raise beneath.Changed(relative, "is no longer a symbolic link") from exc

    def judge_links(self) -> None:
        for relative, target in sorted(self.links.items()):
            try:
                raw = target.encode("utf-8")
            except UnicodeEncodeError:
                self.leave_out(relative, EntryKind.SYMLINK, ExclusionReason.BAD_NAME, "target")
                continue
            if not self.policy.allow_external_symlinks and _leaves(relative, target, self.links):
                why = f"-> {target!r} leaves the candidate"
                self.leave_out(relative, EntryKind.SYMLINK, ExclusionReason.EXTERNAL_SYMLINK, why)
                continue
            sha = hashlib.sha256(raw).hexdigest()
            self.entries.append(
                ManifestEntry(relative, EntryKind.SYMLINK, 0o777, len(raw), sha, target)
            )
            if self.sink is not None:
                self.sink.symlink(relative, target)

    def sorted_excluded(self) -> list[Excluded]:
        return sorted(self.excluded, key=lambda item: os.fsencode(item.path))


def _read_files(
    fd: int, prefix: str, names: list[str], policy: SnapshotPolicy, sink: Sink | None
) -> tuple[list[ManifestEntry], list[Excluded]]:
    """Open each file `names` of the directory `fd` once and read it once: into the sink
    (hashed on the way) or only hashed."""
    found: list[ManifestEntry] = []
    left_out: list[Excluded] = []
    buffer = memoryview(bytearray(remote_program.CHUNK)) if sink is None else None
    for name in names:
        relative = prefix + name
        file, info = _opened(relative, beneath.open_file, fd, name)
        try:
            if info.st_size > policy.max_file_bytes:
                over = f"{size_text(info.st_size)} over the {size_text(policy.max_file_bytes)}"
                left_out.append(
                    Excluded(relative, EntryKind.FILE, ExclusionReason.TOO_LARGE, over + " limit")
                )
                continue
            mode = 0o755 if info.st_mode & stat.S_IXUSR else 0o644
            content = Content(file, relative, info.st_size)
            try:
                if sink is not None:
                    sink.file(relative, staged_mode(mode, info.st_mode), content)
                else:
                    assert buffer is not None
                    content.drain(buffer)
                sha = content.finish()
            except beneath.Changed:
                raise
            except OSError as exc:
                why = exc.strerror or str(exc)
                raise CandidateError(f"cannot read {relative!r}: {why}") from exc
            found.append(ManifestEntry(relative, EntryKind.FILE, mode, content.size, sha))
        finally:
            os.close(file)
    return found, left_out


class _Pool:
    """Hashing on a few threads (reads and hashlib release the GIL: most of a candidate's cost
    is system calls on small files), each task reading a batch of files of one directory
    through its own duplicate of the directory's descriptor."""

    def __init__(self, cleanup: ExitStack) -> None:
        self.executor: ThreadPoolExecutor | None = None
        self.cleanup = cleanup
        self.slots = threading.BoundedSemaphore(_IN_FLIGHT)
        self.futures: list[Future[tuple[list[ManifestEntry], list[Excluded]]]] = []

    def submit(self, fd: int, prefix: str, names: list[str], policy: SnapshotPolicy) -> None:
        if self.executor is None:
            self.executor = ThreadPoolExecutor(_HASH_THREADS, thread_name_prefix="vibesys-hash")
            self.cleanup.callback(self.executor.shutdown, cancel_futures=True)
        self.slots.acquire()
        try:
            copy = os.dup(fd)
        except BaseException:
            self.slots.release()
            raise

        def task() -> tuple[list[ManifestEntry], list[Excluded]]:
            try:
                return _read_files(copy, prefix, names, policy, None)
            finally:
                os.close(copy)
                self.slots.release()

        self.futures.append(self.executor.submit(task))

    def results(self) -> Iterator[tuple[list[ManifestEntry], list[Excluded]]]:
        for future in self.futures:
            yield future.result()


def _close_all(stack: list[tuple[int, str, Iterator[str]]]) -> None:
    for fd, _, _ in stack:
        os.close(fd)


def _opened(relative: str, how: Callable[[int, str, str], T], fd: int, name: str) -> T:
    """`how(fd, name, relative)`, a failure that is not a change named by its path."""
    try:
        return how(fd, name, relative)
    except beneath.Changed:
        raise
    except OSError as exc:
        raise CandidateError(f"cannot read {relative!r}: {exc.strerror or exc}") from exc


def _kind(entry: os.DirEntry[str]) -> EntryKind | None:
    if entry.is_symlink():
        return EntryKind.SYMLINK
    if entry.is_dir(follow_symlinks=False):
        return EntryKind.DIRECTORY
    if entry.is_file(follow_symlinks=False):
        return EntryKind.FILE
    return None


def _leaves(relative: str, target: str, links: dict[str, str]) -> bool:
    """Whether the link at `relative` ends outside the tree, resolved as the file system would
    (through the tree's other links) but over the links this walk read, not the live tree: a
    name swapped meanwhile cannot make a leaving link look inside. A loop counts as leaving."""
    if target.startswith("/"):
        return True
    where = relative.split("/")[:-1]
    todo = target.split("/")
    hops = 0
    while todo:
        part = todo.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not where:
                return True
            where.pop()
            continue
        here = "/".join([*where, part])
        if here in links:
            hops += 1
            followed = links[here]
            if hops > _MAX_HOPS or followed.startswith("/"):
                return True
            todo = followed.split("/") + todo
            continue
        where.append(part)
    return False
