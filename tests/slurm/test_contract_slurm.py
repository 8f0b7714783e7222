"""The adapter contract (tests/adapters/contract/suite.py) against Slurm's sbatch adapter on
the local cluster, through its Python API: the outcomes, a crash at every failpoint a run
passes (its logs come home over the spool, so that one's too) then reconcile, and the late
submission. Its late submission is an `sbatch` on PATH that fails the next submission with a
socket timeout and hands it to the real sbatch once the submitter has moved on."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.adapters.contract.suite import (
    System,
    check_cancel,
    check_crash_then_reconcile,
    check_failure,
    check_late_submission_is_fenced,
    check_success,
)
from tests.helpers.failpoints import RUN_FAILPOINTS, SPOOL_FAILPOINTS
from vibesys.adapters.slurm.request import SbatchRequest
from vibesys.adapters.slurm.sbatch import SbatchBackend
from vibesys.config.load import load_slurm_config

pytestmark = pytest.mark.slurm

SBATCH = shutil.which("sbatch") or "/usr/bin/sbatch"

#: `sbatch` while a `stall` file is beside it: the submission fails as a frozen controller's
#: does, and reaches the controller once a `release` file appears (within a minute).
LATE_SBATCH = f"""#!/bin/bash
here=$(dirname "$0")
if [ -e "$here/stall" ]; then
  rm -f "$here/stall"
  (
    for _ in $(seq 600); do [ -e "$here/release" ] && exec {SBATCH} "$@"; sleep 0.1; done
  ) >/dev/null 2>&1 &
  echo "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation" >&2
  exit 1
fi
exec {SBATCH} "$@"
"""


def submitted(name: str) -> int:
    out = subprocess.run(
        ["squeue", "-h", "--states=all", "--name", name, "-o", "%i"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return len(out.split())


def sbatch_system(root: Path, toml: Path, monkeypatch: pytest.MonkeyPatch | None = None) -> System:
    request = SbatchRequest(site_config=str(toml), time_minutes=5, partitions=("main",))
    remote = Path(load_slurm_config(toml).slurm.remote_workspace_root)

    @contextlib.contextmanager
    def late_submission() -> Iterator[None]:
        assert monkeypatch is not None
        shims = root / "shims"
        shims.mkdir(exist_ok=True)
        (shims / "sbatch").write_text(LATE_SBATCH)
        (shims / "sbatch").chmod(0o755)
        (shims / "stall").touch()
        with monkeypatch.context() as patch:
            patch.setenv("PATH", f"{shims}:{os.environ['PATH']}")
            yield
        (shims / "release").touch()

    backend = SbatchBackend(load_slurm_config(toml))
    return System("sbatch", backend, request, submitted, root, remote, late_submission)


def test_success_and_its_logs(tmp_path: Path, slurm_toml: Path) -> None:
    check_success(sbatch_system(tmp_path, slurm_toml))


def test_failure_keeps_its_exit_code(tmp_path: Path, slurm_toml: Path) -> None:
    check_failure(sbatch_system(tmp_path, slurm_toml))


def test_cancel(tmp_path: Path, slurm_toml: Path) -> None:
    check_cancel(sbatch_system(tmp_path, slurm_toml))


@pytest.mark.parametrize("point", [*RUN_FAILPOINTS, *SPOOL_FAILPOINTS])
def test_crash_at_failpoint_then_reconcile_runs_exactly_once(
    tmp_path: Path, slurm_toml: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    check_crash_then_reconcile(sbatch_system(tmp_path, slurm_toml), monkeypatch, point)


def test_a_submission_accepted_after_its_fence_never_runs(
    tmp_path: Path, slurm_toml: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check_late_submission_is_fenced(sbatch_system(tmp_path, slurm_toml, monkeypatch))
