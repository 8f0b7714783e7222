"""Putting a manifest's snapshot on the cluster through a Runner, and the argv a job wrapper
runs to copy and verify it.

Remote layout under `remote_root`:
    snapshots/<digest>/                    an installed snapshot (entries + `.vibesys-snapshot`)
    snapshots/.incoming-<token>[.tar]      a stage in progress (removed when it ends, even badly)
    snapshots/.quarantine-<digest>-<token> a copy that failed to verify, kept for inspection
"""

from __future__ import annotations

import os
import re
import secrets
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Final

from msgspec import Struct

from vibesys.adapters.base import Progress
from vibesys.adapters.staging.errors import StagingFailed
from vibesys.adapters.staging.upload import Helper, Upload, verify_script, write_tar
from vibesys.adapters.transports.base import CommandResult, Runner
from vibesys.errors import UsageError
from vibesys.snapshot import remote_program
from vibesys.snapshot.manifest import Manifest

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "SNAPSHOTS_DIR",
    "VERIFY_MISMATCH_EXIT",
    "StageOutcome",
    "StageResult",
    "copy_command",
    "probe_argv",
    "snapshot_path",
    "stage",
    "verify_command",
    "verify_script",
]

#: Exit status of `verify_command` (and of `copy_command` when its source is not a snapshot)
#: when the directory is not exactly the snapshot: an infrastructure error, the command must
#: not run.
VERIFY_MISMATCH_EXIT: Final = remote_program.EXIT_MISMATCH
#: Tar bytes sent per remote command; local memory stays within about twice this.
DEFAULT_CHUNK_BYTES: Final = 16 * 1024 * 1024
SNAPSHOTS_DIR: Final = "snapshots"
_DIGEST = re.compile(r"\A[0-9a-f]{64}\Z")


class StageOutcome(StrEnum):
    #: a verified copy was already there; nothing was uploaded
    REUSED = "reused"
    #: uploaded, verified and put in place
    UPLOADED = "uploaded"
    #: uploaded, but a concurrent stager put its (verified) copy in place first
    RACED = "raced"
    #: uploaded; the copy that was there did not verify and was moved to quarantine
    REPLACED = "replaced"


class StageResult(Struct, frozen=True):
    digest: str
    #: `<remote_root>/snapshots/<digest>`, verified
    snapshot_dir: PurePosixPath
    outcome: StageOutcome
    #: tar bytes sent to the remote side (0 when reused)
    uploaded_bytes: int
    #: remote commands run
    commands: int
    #: where a copy that failed to verify was moved (REPLACED only)
    quarantined: PurePosixPath | None
    #: one line for the journal
    evidence: str

    @property
    def reused(self) -> bool:
        return self.outcome is StageOutcome.REUSED


def snapshot_path(remote_root: PurePosixPath | str, digest: str) -> PurePosixPath:
    """Where the snapshot `digest` lives under `remote_root`."""
    return _remote_path("remote_root", remote_root) / SNAPSHOTS_DIR / _check_digest(digest)


def probe_argv(
    remote_root: PurePosixPath | str, digest: str, *, python: str = "python3"
) -> list[str]:
    """argv that answers whether the snapshot `digest` is staged under `remote_root`: exit 0
    (verified), 3 (absent) or 86 (there but not verified), as `stage` itself asks."""
    final = snapshot_path(remote_root, digest)
    return [python, "-I", "-c", verify_script(), "--probe", str(final), digest]


def verify_command(
    directory: PurePosixPath | str, digest: str, *, python: str = "python3"
) -> list[str]:
    """argv that exits 0 when `directory` holds exactly the snapshot `digest`, and
    VERIFY_MISMATCH_EXIT (86) otherwise. `-I` keeps the candidate's own modules (a `hashlib.py`
    in the working directory) and PYTHON* variables out of the verifier."""
    path = _remote_path("directory", directory)
    return [python, "-I", "-c", verify_script(), str(path), _check_digest(digest)]


#: `sh -c _COPY vibesys-copy SNAPSHOT WORK`: paths arrive as positional arguments, never
#: re-parsed by a shell.
_COPY: Final = f"""set -eu
src=$1
dst=$2
tmp=$dst.vibesys-copy.$$
if [ ! -f "$src/{remote_program.MARKER}" ]; then
  printf 'vibesys-snapshot: %s is not a snapshot\\n' "$src" >&2
  exit {remote_program.EXIT_MISMATCH}
fi
parent=${{dst%/*}}
mkdir -p -- "${{parent:-/}}"
rm -rf -- "$tmp"
cp -a -- "$src" "$tmp"
rm -rf -- "$dst"
mv -- "$tmp" "$dst"
"""


def copy_command(snapshot_dir: PurePosixPath | str, work_dir: PurePosixPath | str) -> list[str]:
    """argv that makes `work_dir` a fresh, complete copy of the snapshot (`cp -a`, marker
    included), replacing whatever was there: running it again leaves the same state, so an
    attempt never sees files an earlier attempt left. The copy is made beside `work_dir` and
    renamed into place. Exits VERIFY_MISMATCH_EXIT when `snapshot_dir` is not a snapshot.
    Not for concurrent use on one `work_dir` (each invocation has its own)."""
    source = _remote_path("snapshot_dir", snapshot_dir)
    target = _remote_path("work_dir", work_dir)
    if source == target or source in target.parents or target in source.parents:
        raise UsageError(f"work_dir {str(target)!r} overlaps the snapshot {str(source)!r}")
    return ["sh", "-c", _COPY, "vibesys-copy", str(source), str(target)]


def stage(
    manifest: Manifest,
    root: str | os.PathLike[str],
    runner: Runner,
    remote_root: PurePosixPath | str,
    *,
    python: str = "python3",
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    timeout: float | None = None,
    probed: CommandResult | None = None,
    progress: Progress | None = None,
) -> StageResult:
    """Make `<remote_root>/snapshots/<digest>/` hold exactly `manifest`'s entries, read from
    `root`, uploading only when no verified copy is there already.

    `probed` is the answer of a probe already run (`probe_argv`, folded into another remote
    command such as a submission): it is not run again. `progress` hears of the bytes sent.

    Raises CandidateError when a file in `root` no longer matches the manifest, SnapshotMismatch
    when the uploaded copy fails to verify, StagingFailed when the remote side cannot store it,
    and the Runner's BackendUnavailable or TransportLost when it cannot be reached. `timeout`
    applies to each remote command."""
    if chunk_bytes < 1:
        raise UsageError("chunk_bytes must be at least 1")
    digest = manifest.digest
    snapshots = _remote_path("remote_root", remote_root) / SNAPSHOTS_DIR
    final = snapshots / digest
    helper = Helper(runner, python, timeout)
    probe = probed if probed is not None else helper.run("--probe", str(final), digest)
    if probe.returncode == remote_program.EXIT_OK:
        evidence = f"snapshot {digest} verified at {final}: reused, nothing uploaded"
        return StageResult(digest, final, StageOutcome.REUSED, 0, helper.count, None, evidence)
    if probe.returncode not in (remote_program.EXIT_ABSENT, remote_program.EXIT_MISMATCH):
        raise helper.failure(probe, StagingFailed)
    upload = Upload(helper, snapshots, secrets.token_hex(8), chunk_bytes, progress)
    if progress is not None:
        progress.begin(f"staging {digest[:12]}", manifest.total_bytes)
    try:
        write_tar(manifest, Path(root), upload)
        answer = upload.finish(digest)
    except BaseException:
        upload.abort()
        raise
    finally:
        if progress is not None:
            progress.end()
    words = answer.stdout.split()
    done = f"snapshot {digest} uploaded to {final}: {upload.sent} bytes in {helper.count} commands"
    quarantined = None
    if words == ["installed"]:
        outcome, evidence = StageOutcome.UPLOADED, done
    elif words == ["present"]:
        outcome = StageOutcome.RACED
        evidence = f"{done}; a concurrent stager put a verified copy in place first"
    elif len(words) == 2 and words[0] == "replaced":
        outcome, quarantined = StageOutcome.REPLACED, snapshots / words[1]
        why = " ".join(probe.stderr.split())[:300]
        evidence = f"{done}; the copy there did not verify ({why}) and was moved to {quarantined}"
    else:
        raise StagingFailed(f"unexpected answer from the remote stager: {answer.stdout!r}")
    return StageResult(
        digest=digest,
        snapshot_dir=final,
        outcome=outcome,
        uploaded_bytes=upload.sent,
        commands=helper.count,
        quarantined=quarantined,
        evidence=evidence,
    )


def _check_digest(digest: str) -> str:
    if not _DIGEST.match(digest):
        raise UsageError(f"{digest!r} is not a snapshot digest (64 lowercase hex digits)")
    return digest


def _remote_path(what: str, path: PurePosixPath | str) -> PurePosixPath:
    pure = PurePosixPath(path)
    if not pure.is_absolute() or ".." in pure.parts or pure == PurePosixPath("/"):
        raise UsageError(f"{what} {str(pure)!r}: must be an absolute path below /, without '..'")
    if "\0" in str(pure):
        raise UsageError(f"{what} holds a NUL byte")
    return pure
