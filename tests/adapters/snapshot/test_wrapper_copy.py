"""The wrapper's copy and verify argv: a fresh verified work copy of a snapshot, refusals, and
no command run on a mismatch."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest

from tests.adapters.snapshot.helpers import stage_into, verify, write
from vibesys.adapters.staging import copy_command, verify_command, verify_script
from vibesys.adapters.transports import shell_join
from vibesys.errors import UsageError
from vibesys.snapshot import build_manifest


def run_argv(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)


def test_copy_makes_a_fresh_verified_copy_and_is_idempotent(
    tmp_path: Path, candidate: Path
) -> None:
    manifest = build_manifest(candidate)
    snapshot = stage_into(manifest, candidate, tmp_path / "remote").snapshot_dir
    work = tmp_path / "runs" / "inv 1; $(touch pwned)\n" / "work\ndir"
    assert run_argv(copy_command(snapshot, str(work))).returncode == 0
    assert verify(work, manifest.digest).returncode == 0
    write(work, "result.json", b"{}")  # an earlier attempt's leftovers
    (work / "train.py").write_bytes(b"edited on the cluster\n")
    assert verify(work, manifest.digest).returncode == 86
    assert run_argv(copy_command(snapshot, str(work))).returncode == 0
    assert verify(work, manifest.digest).returncode == 0
    assert not (work / "result.json").exists()
    assert sorted(p.name for p in work.parent.iterdir()) == ["work\ndir"]
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


def test_copy_refuses_a_source_that_is_not_a_snapshot(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = run_argv(copy_command(str(tmp_path / "empty"), str(tmp_path / "work")))
    assert done.returncode == 86 and "not a snapshot" in done.stderr
    assert not (tmp_path / "work").exists()


def test_copy_refuses_overlapping_or_relative_paths() -> None:
    with pytest.raises(UsageError):
        copy_command("/r/snapshots/x", "/r/snapshots/x/work")
    with pytest.raises(UsageError):
        copy_command("/r/snapshots/x", "/r")
    with pytest.raises(UsageError):
        copy_command("/r/snapshots/x", "work")


def test_a_wrapper_does_not_run_the_command_on_a_mismatch(tmp_path: Path, candidate: Path) -> None:
    """copy, verify, then the command, as a batch script would chain them."""
    manifest = build_manifest(candidate)
    snapshot = Path(stage_into(manifest, candidate, tmp_path / "remote").snapshot_dir)
    work, ran = tmp_path / "work", tmp_path / "command-ran"

    def wrapper() -> int:
        script = " && ".join(
            [
                shell_join(copy_command(str(snapshot), str(work))),
                shell_join(verify_command(str(work), manifest.digest, python=sys.executable)),
                shell_join(["touch", str(ran)]),
            ]
        )
        return subprocess.run(["bash", "-c", script], check=False, timeout=60).returncode

    assert wrapper() == 0 and ran.exists()
    ran.unlink()
    (snapshot / "pkg/model.py").write_bytes(b"W = 666\n")
    assert wrapper() == 86 and not ran.exists()
    shutil.rmtree(snapshot)
    assert wrapper() == 86 and not ran.exists()


def test_verify_command_shape() -> None:
    argv = verify_command(PurePosixPath("/w/inv"), "a" * 64)
    assert argv[:3] == ["python3", "-I", "-c"] and argv[4:] == ["/w/inv", "a" * 64]
    assert argv[3] == verify_script()
