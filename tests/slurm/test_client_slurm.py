"""`vibesys.Client` on the real cluster: sbatch handles of one process, driven by its threads,
end with their exit codes and bring their bytes home; their status queries are one squeue per
site round (counted by logging shims on PATH, as test_shared_poll_slurm.py does)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from tests.slurm.test_shared_poll_slurm import logging_shims
from vibesys import Client
from vibesys.job_result import JobStatus

pytestmark = pytest.mark.slurm


def test_sbatch_handles_of_one_process_share_the_sites_rounds(
    tmp_path: Path, slurm_toml: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shims, log = logging_shims(tmp_path)
    monkeypatch.setenv("PATH", f"{shims}:{os.environ['PATH']}")
    monkeypatch.delenv("VIBESYS_FAILPOINTS", raising=False)
    journal = tmp_path / ".vibesys" / "journal.db"
    job = "printf 'seed %s \\377\\n' $0; sleep 2; exit $0"
    with Client(journal) as client:
        handles = [
            client.submit(
                ["sh", "-c", job, str(seed)],
                adapter="sbatch",
                slurm_config=slurm_toml,
                key=f"seed-{seed}",
                cwd=tmp_path,
            )
            for seed in (0, 1, 2)
        ]
        found = [handle.result(240) for handle in handles]
        logs = [b"".join(handle.logs()) for handle in handles]
    assert [(f.status, f.exit_code) for f in found] == [
        (JobStatus.COMPLETED, 0),
        (JobStatus.APPLICATION_FAILED, 1),
        (JobStatus.APPLICATION_FAILED, 2),
    ]
    assert all(f.remote_job_id for f in found)
    assert logs == [f"seed {seed} ".encode() + b"\xff\n" for seed in (0, 1, 2)]
    calls = [line.split() for line in log.read_text().splitlines()]
    assert len([c for c in calls if c[0] == "sbatch"]) == 3  # one job per key
    squeues = [c for c in calls if c[0] == "squeue"]
    with sqlite3.connect(journal) as conn:
        [(rounds,)] = conn.execute("SELECT round FROM poll_sites").fetchall()
    assert len(squeues) == rounds, calls  # every status query was one round of the site
    asked = [set(c[c.index("--name") + 1].split(",")) for c in squeues]
    assert any(len(a) > 1 for a in asked), asked  # rounds served several handles at once
