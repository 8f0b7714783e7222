"""The adapter contract's outcomes (tests/adapters/contract/suite.py) against Slurm's sbatch
adapter on the local cluster: the same checks the test-only batch scheduler passes. A crash at
every failpoint and the stalls are Slurm's own tests (test_crash_slurm.py, with both Slurm
adapters through the command line, and test_stalls_slurm.py), not repeated here."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.adapters.contract.suite import System, check_cancel, check_failure, check_success
from vibesys.adapters.slurm.request import SbatchRequest
from vibesys.adapters.slurm.sbatch import SbatchBackend
from vibesys.config import load_slurm_config

pytestmark = pytest.mark.slurm


def submitted(name: str) -> int:
    out = subprocess.run(
        ["squeue", "-h", "--states=all", "--name", name, "-o", "%i"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return len(out.split())


def sbatch_system(root: Path, toml: Path) -> System:
    request = SbatchRequest(site_config=str(toml), time_minutes=5, partitions=("main",))
    return System("sbatch", SbatchBackend(load_slurm_config(toml)), request, submitted, root)


def test_success_and_its_logs(tmp_path: Path, slurm_toml: Path) -> None:
    check_success(sbatch_system(tmp_path, slurm_toml))


def test_failure_keeps_its_exit_code(tmp_path: Path, slurm_toml: Path) -> None:
    check_failure(sbatch_system(tmp_path, slurm_toml))


def test_cancel(tmp_path: Path, slurm_toml: Path) -> None:
    check_cancel(sbatch_system(tmp_path, slurm_toml))
