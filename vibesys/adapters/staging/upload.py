"""Sending a manifest's files to the cluster as one tar stream: read through file descriptors
that must not follow links, checked against the manifest as they are read, and uploaded in
pieces through the remote helper (`vibesys.snapshot._remote`)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.resources
import io
import os
import tarfile
from pathlib import Path, PurePosixPath
from types import TracebackType

from vibesys.adapters.base import Progress
from vibesys.adapters.staging.errors import SnapshotMismatch, StagingFailed
from vibesys.adapters.transports.base import CommandResult, Runner
from vibesys.errors import BackendError
from vibesys.snapshot import _remote
from vibesys.snapshot.errors import CandidateError
from vibesys.snapshot.manifest import EntryKind, Manifest, ManifestEntry

__all__ = [
    "Helper",
    "ManifestFileReader",
    "Upload",
    "changed_error",
    "verify_script",
    "write_tar",
]


class Helper:
    """Runs the remote helper through the Runner and counts the commands."""

    def __init__(self, runner: Runner, python: str, timeout: float | None) -> None:
        self.runner = runner
        self.python = python
        self.timeout = timeout
        self.count = 0

    def run(self, mode: str, *args: str, input: bytes | None = None) -> CommandResult:
        self.count += 1
        argv = [self.python, "-I", "-c", verify_script(), mode, *args]
        return self.runner.run(argv, input=input, timeout=self.timeout)

    @staticmethod
    def failure(result: CommandResult, kind: type[BackendError]) -> BackendError:
        # Not CommandResult.evidence(): the argv holds the whole helper script.
        what = " ".join(result.argv[4:])
        stderr = " ".join(result.stderr.split())[:500] or "(no stderr)"
        if result.returncode == 127:
            stderr += f" ({result.argv[0]} not found on the remote side?)"
        line = f"snapshot helper {what} -> rc={result.returncode}: {stderr}"
        return kind(line, evidence=line)


class Upload:
    """Where tarfile writes the archive: sent in pieces of `chunk_bytes`, each with one
    `--append` command; the rest goes with the final `--install`."""

    def __init__(
        self,
        helper: Helper,
        snapshots: PurePosixPath,
        token: str,
        chunk_bytes: int,
        progress: Progress | None = None,
    ) -> None:
        self.progress = progress
        self.helper = helper
        self.snapshots = str(snapshots)
        self.token = token
        self.chunk_bytes = chunk_bytes
        self.buffer = bytearray()
        self.position = 0
        self.sent = 0

    def write(self, data: bytes) -> int:
        self.buffer += data
        self.position += len(data)
        while len(self.buffer) >= self.chunk_bytes:
            piece = bytes(self.buffer[: self.chunk_bytes])
            del self.buffer[: self.chunk_bytes]
            result = self.helper.run("--append", self.snapshots, self.token, input=piece)
            if not result.ok:
                raise self.helper.failure(result, StagingFailed)
            self.sent += len(piece)
            if self.progress is not None:
                self.progress.advance(len(piece))
        return len(data)

    def tell(self) -> int:
        return self.position

    # The rest of what tarfile's file protocol names; a write-only stream never uses them.
    def read(self, size: int, /) -> bytes:
        raise io.UnsupportedOperation("read")

    def seek(self, pos: int, /) -> int:
        raise io.UnsupportedOperation("seek")

    def close(self) -> None:
        pass

    def finish(self, digest: str) -> CommandResult:
        piece = bytes(self.buffer)
        self.buffer.clear()
        result = self.helper.run("--install", self.snapshots, digest, self.token, input=piece)
        self.sent += len(piece)
        if self.progress is not None:
            self.progress.advance(len(piece))
        if result.returncode == _remote.EXIT_MISMATCH:
            raise self.helper.failure(result, SnapshotMismatch)
        if not result.ok:
            raise self.helper.failure(result, StagingFailed)
        return result

    def abort(self) -> None:
        """Best effort: remove the partial upload (the remote side already cleans up after a
        failed install; this covers a failure between pieces)."""
        with contextlib.suppress(BackendError):
            self.helper.run("--abort", self.snapshots, self.token)


class ManifestFileReader:
    """A candidate file read for the archive, checked against its manifest entry as it goes."""

    def __init__(self, root: Path, entry: ManifestEntry) -> None:
        self.entry = entry
        fd = os.open(root / entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        self.file = open(fd, "rb", buffering=0)  # noqa: SIM115 (closed by __exit__)
        self.hash = hashlib.sha256()
        self.size = 0

    def read(self, count: int = -1, /) -> bytes:
        data = self.file.read(count)
        self.hash.update(data)
        self.size += len(data)
        return data

    def unchanged(self) -> bool:
        return (
            not self.file.read(1)
            and self.size == self.entry.size
            and self.hash.hexdigest() == self.entry.sha256
        )

    def __enter__(self) -> ManifestFileReader:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.file.close()


def write_tar(manifest: Manifest, root: Path, sink: Upload) -> None:
    """The manifest's entries as a PAX archive, in digest order (parents before children):
    regular files, directories and symbolic links only, owner 0, time 0, normalized modes."""
    with tarfile.TarFile(
        fileobj=sink,  # tarfile needs only write() and tell() of it
        mode="w",
        format=tarfile.PAX_FORMAT,
        encoding="utf-8",
        copybufsize=_remote.CHUNK,
    ) as tar:
        for entry in manifest.entries:
            info = tarfile.TarInfo(entry.path)
            info.mode = entry.mode
            info.mtime = 0
            try:
                if entry.kind is EntryKind.DIRECTORY:
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                elif entry.kind is EntryKind.SYMLINK:
                    if os.readlink(root / entry.path) != entry.target:
                        raise changed_error(entry)
                    info.type = tarfile.SYMTYPE
                    info.linkname = entry.target or ""
                    tar.addfile(info)
                else:
                    info.size = entry.size
                    with ManifestFileReader(root, entry) as reader:
                        tar.addfile(info, reader)
                        if not reader.unchanged():
                            raise changed_error(entry)
            except OSError as exc:
                raise changed_error(entry) from exc


def changed_error(entry: ManifestEntry) -> CandidateError:
    return CandidateError(
        f"{entry.path!r} changed after the manifest was built; build the manifest again"
    )


@functools.cache
def verify_script() -> str:
    """The remote helper's source (stdlib only, Python 3.6+). As a verifier:
    `python3 -I -c SCRIPT DIR DIGEST` exits 0 when DIR is exactly the snapshot DIGEST (the
    top-level marker aside), else VERIFY_MISMATCH_EXIT with one line on stderr."""
    source = importlib.resources.files("vibesys.snapshot").joinpath("_remote.py")
    return source.read_text(encoding="utf-8")
