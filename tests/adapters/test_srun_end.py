"""The srun adapter sees its job's end when its own srun returns: the job's claim and exit
marker are then its outcome, at once (the live check is tests/slurm/test_outcomes_slurm.py).
Without that proof (no marker: killed, out of time, its node lost; another job's claim; a
fence) it says nothing and the status rounds decide. No cluster: srun is a stand-in process."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from vibesys.adapters.base import JobRef, RemoteState, SeesItsOwnEnd
from vibesys.adapters.slurm import srun
from vibesys.config.load import parse_slurm_config


def backend(root: Path) -> srun.SrunBackend:
    config = parse_slurm_config(
        f'[slurm]\nname = "here"\nremote_workspace_root = "{root}"\n'
        '[slurm.transport]\nkind = "local"\n'
    )
    return srun.SrunBackend(config)


def launched(backend: srun.SrunBackend, job: JobRef, exits: int) -> srun._Launched:
    """A finished stand-in for srun, recorded as this backend's own."""
    process = subprocess.Popen(["sh", "-c", f"exit {exits}"])
    record = srun._Launched(process, threading.Event(), "main")
    backend._launched[job.job_name] = record
    record.reap()
    return record


CLAIM = (
    "kind=job\nhost=vm\nstarted_at=2026-01-02T03:04:05Z\nslurm_job_id={id}\n"
    "slurm_node=node1\nslurm_partition=main\nslurm_cpus=1\n"
)


@pytest.fixture
def job(tmp_path: Path) -> JobRef:
    ref = JobRef("vibesys-abc-1", "42", tmp_path / "local", None, "abc", 1)
    (tmp_path / "remote" / "abc" / "1").mkdir(parents=True)
    return ref


def attempt_dir(tmp_path: Path) -> Path:
    return tmp_path / "remote" / "abc" / "1"


def test_the_end_is_the_claim_and_the_marker_once_srun_returned(
    tmp_path: Path, job: JobRef
) -> None:
    adapter = backend(tmp_path / "remote")
    assert isinstance(adapter, SeesItsOwnEnd)
    (attempt_dir(tmp_path) / "claim").write_text(CLAIM.format(id=42))
    (attempt_dir(tmp_path) / "exit_code").write_text("3\n")
    assert adapter.end_signal(job) is None and adapter.ended_here(job) is None  # not ours
    record = launched(adapter, job, 3)
    assert adapter.end_signal(job) is record.ended and record.ended.is_set()
    status = adapter.ended_here(job)
    assert status is not None
    assert (status.state, status.exit_code, status.job_id) == (RemoteState.FAILED, 3, "42")
    assert "srun exited 3; marker exit_code=3" in status.observation
    where = dict(status.provenance)
    assert (where["site"], where["nodes"], where["partition"], where["cpus"]) == (
        "here",
        "node1",
        "main",
        "1",
    )
    assert where["start"] <= where["end"]


@pytest.mark.parametrize(
    ("claim", "marker", "why"),
    [
        (CLAIM.format(id=42), None, "no marker: the job was killed or lost"),
        (CLAIM.format(id=77), "0", "another job claimed the attempt"),
        ("kind=fence\nby=someone\n", "0", "a fence holds the attempt"),
        (None, "0", "no claim"),
    ],
)
def test_without_the_proof_the_rounds_decide(
    tmp_path: Path, job: JobRef, claim: str | None, marker: str | None, why: str
) -> None:
    adapter = backend(tmp_path / "remote")
    if claim is not None:
        (attempt_dir(tmp_path) / "claim").write_text(claim)
    if marker is not None:
        (attempt_dir(tmp_path) / "exit_code").write_text(marker + "\n")
    launched(adapter, job, 0)
    assert adapter.ended_here(job) is None, why


def test_nothing_is_concluded_while_srun_runs(tmp_path: Path, job: JobRef) -> None:
    adapter = backend(tmp_path / "remote")
    (attempt_dir(tmp_path) / "claim").write_text(CLAIM.format(id=42))
    (attempt_dir(tmp_path) / "exit_code").write_text("0\n")
    process = subprocess.Popen(["sleep", "30"])
    try:
        adapter._launched[job.job_name] = srun._Launched(process, threading.Event(), None)
        assert adapter.ended_here(job) is None
    finally:
        process.kill()
        process.wait()
