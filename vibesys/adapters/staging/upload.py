"""Sending a candidate to the cluster as one tar stream: read once through the candidate's one
reader (descriptors under the root, never a link, each file's bytes hashed as they are
archived), checked against the manifest, and uploaded in pieces through the remote helper
(`vibesys.snapshot.remote_program`)."""

from __future__ import annotations

import contextlib
import functools
import importlib.resources
import io
import tarfile
from pathlib import Path, PurePosixPath

from vibesys.adapters.base import Progress
from vibesys.adapters.staging.errors import SnapshotMismatch, StagingFailed
from vibesys.adapters.transports.base import CommandResult, Runner
from vibesys.errors import BackendError
from vibesys.snapshot import remote_program
from vibesys.snapshot.errors import CandidateError
from vibesys.snapshot.manifest import Manifest
from vibesys.snapshot.policy import SnapshotPolicy
from vibesys.snapshot.reader import Content, read_tree

__all__ = [
    "Helper",
    "TarSink",
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
        if result.returncode == remote_program.EXIT_MISMATCH:
            raise self.helper.failure(result, SnapshotMismatch)
        if not result.ok:
            raise self.helper.failure(result, StagingFailed)
        return result

    def abort(self) -> None:
        """Best effort: remove the partial upload (the remote side already cleans up after a
        failed install; this covers a failure between pieces)."""
        with contextlib.suppress(BackendError):
            self.helper.run("--abort", self.snapshots, self.token)


class TarSink:
    """What the candidate's one reader (`vibesys.snapshot.reader`) reads, as tar members: the
    bytes hashed are the bytes archived. Owner 0, time 0, the normalized modes limited to what
    the source grants (`staged_mode`)."""

    def __init__(self, tar: tarfile.TarFile) -> None:
        self.tar = tar

    def directory(self, relative: str, mode: int) -> None:
        self.tar.addfile(self._info(relative, tarfile.DIRTYPE, mode))

    def file(self, relative: str, mode: int, content: Content) -> None:
        info = self._info(relative, tarfile.REGTYPE, mode)
        info.size = content.size
        self.tar.addfile(info, content)  # tarfile needs read() only

    def symlink(self, relative: str, target: str) -> None:
        info = self._info(relative, tarfile.SYMTYPE, 0o777)
        info.linkname = target
        self.tar.addfile(info)

    @staticmethod
    def _info(relative: str, kind: bytes, mode: int) -> tarfile.TarInfo:
        info = tarfile.TarInfo(relative)
        info.type = kind
        info.mode = mode
        info.mtime = 0
        return info


def write_tar(manifest: Manifest, root: Path, sink: Upload) -> None:
    """The candidate at `root` as a PAX archive (parents before children, links last), read
    once through the candidate's one reader under the manifest's policy: it must come out as
    exactly `manifest`, else CandidateError naming the first path that differs (the caller
    then aborts the upload: nothing that differs is installed)."""
    policy = manifest.policy or SnapshotPolicy()
    with tarfile.TarFile(
        fileobj=sink,  # tarfile needs only write() and tell() of it
        mode="w",
        format=tarfile.PAX_FORMAT,
        encoding="utf-8",
        copybufsize=remote_program.CHUNK,
    ) as tar:
        try:
            archived = read_tree(root, policy, TarSink(tar))
        except OSError as exc:  # tarfile's "unexpected end of data": a file shrank
            raise CandidateError(f"the candidate changed while it was staged: {exc}") from exc
    if archived.digest != manifest.digest:
        raise changed_error(_first_difference(manifest, archived))


def _first_difference(expected: Manifest, archived: Manifest) -> str:
    def records(manifest: Manifest) -> set[tuple[str, str, str]]:
        return {(entry.path, entry.mode_text, entry.sha256) for entry in manifest.entries}

    differ = records(expected) ^ records(archived)
    return min((path for path, _, _ in differ), key=lambda path: path.encode("utf-8"))


def changed_error(path: str) -> CandidateError:
    return CandidateError(
        f"{path!r} changed after the manifest was built; build the manifest again"
    )


@functools.cache
def verify_script() -> str:
    """The remote helper's source (stdlib only, Python 3.6+). As a verifier:
    `python3 -I -c SCRIPT DIR DIGEST` exits 0 when DIR is exactly the snapshot DIGEST (the
    top-level marker aside), else VERIFY_MISMATCH_EXIT with one line on stderr."""
    source = importlib.resources.files("vibesys.snapshot").joinpath("remote_program.py")
    text = source.read_text(encoding="utf-8")
    rules = importlib.resources.files("vibesys.osutil").joinpath("beneath.py")
    # The remote side has no vibesys: the descriptor-relative primitives go as their own text.
    before, line, after = text.partition(_BENEATH_IMPORT)
    if not line or _BENEATH_IMPORT in after:
        raise AssertionError("remote_program.py imports beneath once, on a line of its own")
    return before + rules.read_text(encoding="utf-8") + after.split("\n", 1)[1]


_BENEATH_IMPORT = "from vibesys.osutil.beneath import "
