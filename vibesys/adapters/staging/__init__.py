"""Staging a candidate snapshot on the cluster through a transport: once per digest, verified,
replaced when tampered; and the shell steps a job runs to copy and verify it before its command.
The snapshot itself (manifest, digest, policy) is pure and lives in `vibesys.snapshot`."""

from __future__ import annotations

from vibesys.adapters.staging.errors import SnapshotMismatch, StagingFailed
from vibesys.adapters.staging.staging import (
    DEFAULT_CHUNK_BYTES,
    SNAPSHOTS_DIR,
    VERIFY_MISMATCH_EXIT,
    StageOutcome,
    StageResult,
    copy_command,
    probe_argv,
    snapshot_path,
    stage,
    verify_command,
)
from vibesys.adapters.staging.upload import verify_script

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "SNAPSHOTS_DIR",
    "VERIFY_MISMATCH_EXIT",
    "SnapshotMismatch",
    "StageOutcome",
    "StageResult",
    "StagingFailed",
    "copy_command",
    "probe_argv",
    "snapshot_path",
    "stage",
    "verify_command",
    "verify_script",
]
