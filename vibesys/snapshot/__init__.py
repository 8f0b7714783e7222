"""Candidate snapshots: the user's working tree, staged once on the cluster as an immutable
directory named by the digest of its content, verified before every command runs in it.

This package is pure and local (the manifest, its digest, the exclusion policy): it is used
before any adapter exists (`vibesys snapshot --dry-run`, the digest recorded at PREPARED).
Staging on the cluster goes through a transport and lives in `vibesys.adapters.staging`.

    manifest = build_manifest(candidate_dir, policy)        # local only: walk and hash (reader)
    print(render_manifest_text(manifest))                   # `vibesys snapshot --dry-run`
    result = stage(manifest, candidate_dir, runner, remote_root)   # vibesys.adapters.staging
    # in the job wrapper, before the command:
    copy_command(result.snapshot_dir, work_dir)             # fresh copy at a stable path
    verify_command(work_dir, manifest.digest)               # exit 86: mismatch, do not run

Decisions:
- Reading: one reader (`reader.py`) for the manifest and every stage: directories opened from
  their parent's descriptor, never through a link, each file read once from the descriptor it
  was opened from; a stage archives the bytes it hashes and must arrive at the recorded digest.
  A name that changes kind, vanishes or changes size while it is read refuses the snapshot in
  one line (CandidateError). Staged copies are never more readable than their source
  (`reader.staged_mode`).
- Content: regular files, directories (empty ones too) and symbolic links. Links are recorded
  with their target text, never followed; a link that is absolute or resolves outside the
  candidate is left out (reason `external-symlink`) unless `allow_external_symlinks`, because
  the digest cannot vouch for what it reaches. FIFOs, sockets and devices are left out.
- Modes are normalized like git's: a file is 0o755 when its owner-execute bit is set, else
  0o644; directories 0o755; links 0o777. Owners and timestamps are not part of a snapshot.
- Names: anything POSIX allows except names that are not valid UTF-8 (left out, `bad-name`).
  Spaces, newlines and any Unicode are fine: the digest encoding is NUL-separated.
- Exclusions: `DEFAULT_EXCLUSIONS` (credentials, VCS, vibesys state, caches, logs), the
  policy's `exclude` patterns, files over `max_file_bytes` (50 MiB). `include` patterns undo a
  pattern exclusion. See `policy` for the pattern syntax.
- Remote: one helper script (`verify_script()`, stdlib only, Python 3.6+) verifies, receives
  and installs. The archive goes up in pieces of `chunk_bytes` (16 MiB), so local memory stays
  bounded whatever the candidate's size; it is extracted into a temporary directory, verified,
  and renamed into place (rename(2) never replaces a non-empty directory, so of two concurrent
  stagers exactly one wins and the other keeps the winner's copy after verifying it).
- Errors: CandidateError (a UsageError: the local tree is unreadable or changed after its
  manifest was built), SnapshotMismatch (retryable BackendError: the upload did not verify),
  StagingFailed (BackendError: the remote side could not store it; rc 127 = no python3), and
  the Runner's own BackendUnavailable / TransportLost.
- Remote exit codes (helper and `verify_command`): 0 verified, 86 (VERIFY_MISMATCH_EXIT) not
  the snapshot (an infrastructure error: the command must not run), 2 bad arguments, 1 other
  failure, 127 from the shell when python3 is missing.
- A snapshot that is there but does not verify is moved aside to
  `snapshots/.quarantine-<digest>-<token>` (kept for inspection) and replaced; the result says
  so (`StageOutcome.REPLACED`).
- Leftovers: a helper that dies without running its cleanup (SIGKILL, a node crash) leaves
  `snapshots/.incoming-<token>[.tar]`; nothing reads them, and a periodic sweep of ones older
  than a day is safe.
"""

from __future__ import annotations

from vibesys.snapshot.errors import CandidateError
from vibesys.snapshot.manifest import (
    MARKER,
    EntryKind,
    Excluded,
    Manifest,
    ManifestEntry,
    compute_digest,
    render_manifest_text,
)
from vibesys.snapshot.policy import (
    DEFAULT_EXCLUSIONS,
    DEFAULT_MAX_FILE_BYTES,
    ExclusionReason,
    SnapshotPolicy,
)
from vibesys.snapshot.reader import build_manifest

__all__ = [
    "DEFAULT_EXCLUSIONS",
    "DEFAULT_MAX_FILE_BYTES",
    "MARKER",
    "CandidateError",
    "EntryKind",
    "Excluded",
    "ExclusionReason",
    "Manifest",
    "ManifestEntry",
    "SnapshotPolicy",
    "build_manifest",
    "compute_digest",
    "render_manifest_text",
]
