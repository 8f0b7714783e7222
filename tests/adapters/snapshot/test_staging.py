"""Staging a snapshot through a real LocalTransport into a scratch "remote" directory: upload,
reuse, quarantine, concurrent stagers, and failures mid-upload or in transit."""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from tests.adapters.snapshot.helpers import EMPTY_SHA, stage_into, verify, write
from vibesys.adapters.staging import (
    SnapshotMismatch,
    StageOutcome,
    StagingFailed,
    snapshot_path,
    stage,
)
from vibesys.adapters.transports import CommandResult, LocalTransport, Runner
from vibesys.adapters.transports.base import Sink
from vibesys.errors import BackendUnavailable, UsageError
from vibesys.snapshot import (
    MARKER,
    CandidateError,
    EntryKind,
    Manifest,
    ManifestEntry,
    build_manifest,
)


def test_first_stage_uploads_and_an_unchanged_restage_uploads_nothing(
    tmp_path: Path, candidate: Path
) -> None:
    remote = tmp_path / "remote"
    manifest = build_manifest(candidate)
    first = stage_into(manifest, candidate, remote)
    assert first.outcome is StageOutcome.UPLOADED and not first.reused
    assert first.uploaded_bytes > 0 and first.commands == 2
    assert first.snapshot_dir == PurePosixPath(remote / "snapshots" / manifest.digest)
    assert first.snapshot_dir == snapshot_path(PurePosixPath(remote), manifest.digest)
    snapshot = Path(first.snapshot_dir)
    assert (snapshot / MARKER).read_text() == manifest.digest + "\n"
    assert (snapshot / "bin/run.sh").stat().st_mode & 0o777 == 0o755
    assert (snapshot / "train.py").stat().st_mode & 0o777 == 0o644
    assert os.readlink(snapshot / "latest") == "pkg/model.py"
    assert (snapshot / "outputs").is_dir()
    assert not (snapshot / ".env").exists() and not (snapshot / ".git").exists()
    assert sorted(p.name for p in (remote / "snapshots").iterdir()) == [manifest.digest]

    second = stage_into(build_manifest(candidate), candidate, remote)
    assert second.outcome is StageOutcome.REUSED and second.reused
    assert (second.uploaded_bytes, second.commands) == (0, 1)
    assert "reused" in second.evidence


def test_a_changed_candidate_gets_its_own_snapshot(tmp_path: Path, candidate: Path) -> None:
    remote = tmp_path / "remote"
    old = stage_into(build_manifest(candidate), candidate, remote)
    (candidate / "train.py").write_bytes(b"print('v2')\n")
    new = stage_into(build_manifest(candidate), candidate, remote)
    assert new.outcome is StageOutcome.UPLOADED and new.digest != old.digest
    assert verify(old.snapshot_dir, old.digest).returncode == 0  # immutable: still there


def test_large_candidates_go_up_in_bounded_pieces(tmp_path: Path) -> None:
    root = tmp_path / "c"
    for index in range(20):
        write(root, f"f{index}.bin", os.urandom(10_000))
    manifest = build_manifest(root)
    result = stage_into(manifest, root, tmp_path / "remote", chunk_bytes=64 * 1024)
    assert result.commands == 1 + -(-result.uploaded_bytes // (64 * 1024))
    assert verify(result.snapshot_dir, manifest.digest).returncode == 0
    assert not list((tmp_path / "remote" / "snapshots").glob(".incoming-*"))


def test_a_tampered_snapshot_is_quarantined_and_staged_again(
    tmp_path: Path, candidate: Path
) -> None:
    remote = tmp_path / "remote"
    manifest = build_manifest(candidate)
    snapshot = Path(stage_into(manifest, candidate, remote).snapshot_dir)
    (snapshot / "train.py").write_bytes(b"print('tampered')\n")
    again = stage_into(manifest, candidate, remote)
    assert again.outcome is StageOutcome.REPLACED and again.uploaded_bytes > 0
    assert again.quarantined is not None
    assert Path(again.quarantined, "train.py").read_bytes() == b"print('tampered')\n"
    assert "did not verify" in again.evidence and str(again.quarantined) in again.evidence
    assert (snapshot / "train.py").read_bytes() == b"print('train')\n"
    assert verify(snapshot, manifest.digest).returncode == 0


def test_something_else_in_the_snapshots_place_is_quarantined(
    tmp_path: Path, candidate: Path
) -> None:
    manifest = build_manifest(candidate)
    snapshots = tmp_path / "remote" / "snapshots"
    write(snapshots, manifest.digest, b"not a directory")
    result = stage_into(manifest, candidate, tmp_path / "remote")
    assert result.outcome is StageOutcome.REPLACED
    assert verify(result.snapshot_dir, manifest.digest).returncode == 0


class GatedRunner:
    """LocalTransport, except each thread waits at a barrier before its first upload: both
    stagers have probed (and found nothing) before either installs."""

    def __init__(self, barrier: threading.Barrier) -> None:
        self.inner = LocalTransport()
        self.barrier = barrier
        self.local = threading.local()

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = None,
        maybe_effect: bool = False,
    ) -> CommandResult:
        if argv[4] in ("--append", "--install") and not getattr(self.local, "passed", False):
            self.local.passed = True
            self.barrier.wait(timeout=60)
        return self.inner.run(argv, input=input, timeout=timeout, maybe_effect=maybe_effect)

    def stream(
        self, argv: Sequence[str], sink: Sink, *, timeout: float | None = None
    ) -> CommandResult:
        return self.inner.stream(argv, sink, timeout=timeout)


@pytest.mark.parametrize("gated", [True, False])
def test_concurrent_stagers_of_one_digest_end_with_one_good_snapshot(
    tmp_path: Path, candidate: Path, gated: bool
) -> None:
    remote = PurePosixPath(tmp_path / "remote")
    manifest = build_manifest(candidate)
    barrier = threading.Barrier(2)
    results: list[Any] = []
    errors: list[BaseException] = []

    def one() -> None:
        transport: Runner = LocalTransport()
        if gated:
            transport = GatedRunner(barrier)
        try:
            results.append(stage(manifest, candidate, transport, remote, python=sys.executable))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    outcomes = sorted(result.outcome.value for result in results)
    if gated:
        assert outcomes == ["raced", "uploaded"]
    else:
        assert outcomes in (["raced", "uploaded"], ["reused", "uploaded"])
    snapshots = Path(remote, "snapshots")
    assert [p.name for p in snapshots.iterdir()] == [manifest.digest]
    assert verify(snapshots / manifest.digest, manifest.digest).returncode == 0


def test_a_candidate_changed_after_its_manifest_is_refused_and_nothing_is_left(
    tmp_path: Path, candidate: Path
) -> None:
    manifest = build_manifest(candidate)
    (candidate / "pkg/model.py").write_bytes(b"W = 2\n")
    with pytest.raises(CandidateError, match=r"pkg/model\.py"):
        stage_into(manifest, candidate, tmp_path / "remote")
    assert leftovers(tmp_path / "remote") == []


def leftovers(remote: Path) -> list[str]:
    snapshots = remote / "snapshots"
    return sorted(p.name for p in snapshots.iterdir()) if snapshots.exists() else []


class FailingRunner(LocalTransport):
    """Loses the connection on the second upload command."""

    def __init__(self) -> None:
        super().__init__()
        self.uploads = 0

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = None,
        maybe_effect: bool = False,
    ) -> CommandResult:
        if argv[4] in ("--append", "--install"):
            self.uploads += 1
            if self.uploads == 2:
                raise BackendUnavailable("connection lost")
        return super().run(argv, input=input, timeout=timeout, maybe_effect=maybe_effect)


def test_a_lost_connection_mid_upload_cleans_up_and_a_later_stage_succeeds(
    tmp_path: Path, candidate: Path
) -> None:
    write(candidate, "data.bin", os.urandom(50_000))
    manifest = build_manifest(candidate)
    remote = PurePosixPath(tmp_path / "remote")
    with pytest.raises(BackendUnavailable):
        stage(
            manifest, candidate, FailingRunner(), remote, python=sys.executable, chunk_bytes=20_000
        )
    assert leftovers(Path(remote)) == []
    assert stage_into(manifest, candidate, Path(remote)).outcome is StageOutcome.UPLOADED


class CorruptingRunner(LocalTransport):
    """Flips one bit of a file's content on its way up: damage in transit."""

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = None,
        maybe_effect: bool = False,
    ) -> CommandResult:
        if input and b"W = 1" in input:
            at = input.index(b"W = 1")
            input = input[:at] + b"V" + input[at + 1 :]
        return super().run(argv, input=input, timeout=timeout, maybe_effect=maybe_effect)


def test_damage_in_transit_is_a_retryable_mismatch_and_nothing_is_installed(
    tmp_path: Path, candidate: Path
) -> None:
    manifest = build_manifest(candidate)
    remote = PurePosixPath(tmp_path / "remote")
    with pytest.raises(SnapshotMismatch) as caught:
        stage(manifest, candidate, CorruptingRunner(), remote, python=sys.executable)
    assert caught.value.retryable is True and "rc=86" in caught.value.evidence
    assert leftovers(Path(remote)) == []
    assert stage_into(manifest, candidate, Path(remote)).outcome is StageOutcome.UPLOADED


def test_a_manifest_lists_each_path_once() -> None:
    entry = ManifestEntry("a", EntryKind.FILE, 0o644, 0, EMPTY_SHA)
    with pytest.raises(ValueError, match="once"):
        Manifest((entry, entry))


def test_no_python_on_the_remote_side_is_a_staging_failure(tmp_path: Path, candidate: Path) -> None:
    manifest = build_manifest(candidate)
    remote = PurePosixPath(tmp_path / "remote")
    with pytest.raises(StagingFailed) as caught:
        stage(manifest, candidate, LocalTransport(), remote, python="no-such-python3")
    assert "rc=127" in caught.value.evidence and "no-such-python3" in caught.value.evidence
    assert len(caught.value.evidence) < 1000  # the helper script is not in the evidence
    assert caught.value.retryable is False


def test_stage_refuses_odd_remote_roots(candidate: Path) -> None:
    manifest = build_manifest(candidate)
    for bad in ["relative/root", "/", "/a/../b"]:
        with pytest.raises(UsageError):
            stage(manifest, candidate, LocalTransport(), bad)


def test_an_empty_candidate_stages(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    manifest = build_manifest(tmp_path / "c")
    result = stage_into(manifest, tmp_path / "c", tmp_path / "remote")
    assert verify(result.snapshot_dir, manifest.digest).returncode == 0
    assert manifest.digest == hashlib.sha256(b"vibesys-snapshot-v1\0").hexdigest()
