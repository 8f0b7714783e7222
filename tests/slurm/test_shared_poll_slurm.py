"""One poll budget per host and site, on the real cluster: concurrent `vibesys run` processes
share one batched status query per round. Scheduler commands are counted by logging shims on
PATH (as benchmarks/bench_slurm.py does): each logs its name and arguments, then execs the
real client."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.slurm import run_args, show

pytestmark = pytest.mark.slurm

CLIENTS = ("squeue", "sacct", "sbatch", "scancel", "scontrol", "sinfo")


def logging_shims(base: Path) -> tuple[Path, Path]:
    directory, log = base / "shims", base / "calls.log"
    directory.mkdir()
    for client in CLIENTS:
        real = shutil.which(client)
        assert real, f"{client} not found"
        shim = directory / client
        shim.write_text(f'#!/bin/sh\necho "{client} $*" >> {log}\nexec {real} "$@"\n')
        shim.chmod(0o755)
    return directory, log


def test_concurrent_runs_share_one_query_per_round(tmp_path: Path, slurm_toml: Path) -> None:
    shims, log = logging_shims(tmp_path)
    env = {**os.environ, "PATH": f"{shims}:{os.environ['PATH']}"}
    env.pop("VIBESYS_FAILPOINTS", None)
    argv = [sys.executable, "-m", "vibesys", *run_args("sbatch", slurm_toml), "sleep", "3"]
    runs = [
        subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outputs = [run.communicate(timeout=120)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0, 0], outputs
    calls = [line.split() for line in log.read_text().splitlines()]
    squeues = [c for c in calls if c[0] == "squeue"]
    sacct = [c for c in calls if c[0] == "sacct"]
    with sqlite3.connect(tmp_path / ".vibesys" / "journal.db") as conn:
        [(rounds,)] = conn.execute("SELECT round FROM poll_sites").fetchall()
        ids = [row[0] for row in conn.execute("SELECT id FROM invocations")]
    # Every status query was one site round's: one squeue per round, for every watched job.
    assert len(squeues) == rounds, calls
    assert sacct == [], calls  # squeue knew every job: sacct is only for forgotten ones
    names = {f"vibesys-{i}-1" for i in ids}
    asked = [set(c[c.index("--name") + 1].split(",")) for c in squeues]
    assert any(len(a) > 1 for a in asked), asked  # rounds served several processes at once
    assert set().union(*asked) == names
    # Far fewer than one query per process per second, as unshared polling made.
    assert rounds < 3 * 3, asked
    # The site's facts were asked once, by the first poller.
    assert [c for c in calls if c[0] == "scontrol"] == [["scontrol", "show", "config"]]
    for invocation in ids:
        shown = show(tmp_path, invocation)
        assert (shown["state"], shown["exit_code"]) == ("DONE", 0), json.dumps(shown)
