"""What the snapshot tests share: writing candidate files, a manifest's paths and exclusions,
the remote verifier's verdict and digest, and staging into a scratch "remote" directory."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path, PurePosixPath
from typing import Any

from vibesys.adapters.staging import stage, verify_command
from vibesys.adapters.transports import LocalTransport
from vibesys.snapshot import (
    ExclusionReason,
    Manifest,
    SnapshotPolicy,
    build_manifest,
    remote_program,
)

#: A policy that leaves nothing out (but structural rules): the verifier has no exclusions.
EVERYTHING = SnapshotPolicy(include=("*",), allow_external_symlinks=True)
EMPTY_SHA = hashlib.sha256(b"").hexdigest()


def write(root: Path, relative: str, data: bytes = b"x", mode: int = 0o644) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode)
    return path


def reasons(root: Path, policy: SnapshotPolicy | None = None) -> dict[str, ExclusionReason]:
    return {item.path: item.reason for item in build_manifest(root, policy).excluded}


def paths(root: Path, policy: SnapshotPolicy | None = None) -> list[str]:
    return [entry.path for entry in build_manifest(root, policy).entries]


def verify(directory: Path | str, digest: str, cwd: Path | None = None) -> CompletedVerify:
    done = subprocess.run(
        verify_command(str(directory), digest, python=sys.executable),
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=False,
    )
    return CompletedVerify(done.returncode, done.stderr)


class CompletedVerify:
    def __init__(self, returncode: int, stderr: str) -> None:
        self.returncode = returncode
        self.stderr = stderr


def remote_digest(directory: Path) -> str:
    return remote_program.digest_of(remote_program.tree_records(os.fsencode(directory)))


def runner() -> LocalTransport:
    return LocalTransport()


def stage_into(manifest: Manifest, root: Path, remote: Path, **options: Any) -> Any:
    return stage(manifest, root, runner(), PurePosixPath(remote), python=sys.executable, **options)
