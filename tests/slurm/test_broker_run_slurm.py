"""A run's GPU brokers through real `vibesys broker serve`, real Slurm and real bwrap: one
`max_concurrent_jobs` for every broker of a run (first come first served across them, a dead
broker's slots given back once its jobs are gone), and a broker started from the deprecated
[slurm_gpu] table, which keeps its own rendering."""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.helpers.hang_guard import wait_until
from tests.helpers.slurm import UNFINISHED, sacct_states
from tests.slurm.test_broker_slurm import (
    BUDGET,
    finish,
    journal_rows,
    start_broker,
    stop_broker,
)

pytestmark = pytest.mark.slurm


def test_two_brokers_of_one_run_share_one_cap(tmp_path: Path) -> None:
    """Two candidate sessions of one run (same journal, same run id), cap 2, four commands
    alternating between them: never more than 2 of the run's jobs in Slurm, first come first
    served across the brokers; then one broker dies with its two jobs running, and the other's
    waiting command runs only once they have left Slurm (cancelled: their clients are gone)."""
    journal = tmp_path / "run" / "journal.db"
    name = f"run{tmp_path.name[-8:]}"
    brokers = [
        start_broker(tmp_path / side, name, cap=2, journal=journal, run_id="run-7")
        for side in ("a", "b")
    ]
    seen: list[int] = []
    watching = threading.Event()

    def in_slurm() -> dict[str, str]:
        return brokers[0].jobs()  # the same prefix: both brokers' jobs

    def watch() -> None:
        while not watching.is_set():
            seen.append(sum(state in UNFINISHED for state in in_slurm().values()))
            time.sleep(0.1)

    def started(i: int) -> bool:
        order = brokers[i % 2].workspace / "order"
        return order.exists() and str(i) in order.read_text().split()

    def command(i: int) -> subprocess.Popen[str]:
        gate = brokers[i % 2].workspace / f"release-{i}"
        script = f"echo {i} >> order; while [ ! -e {gate} ]; do sleep 0.1; done"
        return brokers[i % 2].client("--gpus", "0", "--", "bash", "-c", script)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        clients = [command(0)]
        wait_until(lambda: started(0), BUDGET, "command 0 to run (broker a)", interval=0.1)
        clients.append(command(1))
        wait_until(lambda: started(1), BUDGET, "command 1 to run (broker b)", interval=0.1)
        waiting = []
        for i in (2, 3):
            clients.append(command(i))
            stderr = clients[i].stderr
            assert stderr is not None
            waiting.append(stderr.readline().rstrip("\n"))  # printed while it waits
        assert waiting == [
            "[vibesys-gpu] waiting: 2 of this run's GPU jobs are active (cap 2), 0 queued ahead",
            "[vibesys-gpu] waiting: 2 of this run's GPU jobs are active (cap 2), 1 queued ahead",
        ]
        # Broker b's own job ends: the slot goes to the first in line, broker a's command 2.
        (brokers[1].workspace / "release-1").touch()
        wait_until(
            lambda: started(2), BUDGET, "command 2 (first in line, broker a) to run", interval=0.1
        )
        assert not started(3) and finish(clients[1])[0] == 0
        # Broker a dies with commands 0 and 2 running: b's command 3 runs once they are gone.
        running = [n for n, state in in_slurm().items() if state == "RUNNING"]
        brokers[0].process.kill()
        brokers[0].process.wait(BUDGET)
        wait_until(
            lambda: started(3),
            BUDGET,
            "command 3 to run once broker a's jobs are gone",
            interval=0.1,
        )
        assert all(sacct_states(n) == ["CANCELLED"] for n in running), running
        (brokers[1].workspace / "release-3").touch()
        results = [finish(proc)[0] for proc in clients]
    finally:
        watching.set()
        watcher.join(BUDGET)
        for broker in brokers:
            stop_broker(broker)
    assert results[1] == results[3] == 0  # broker b's commands; a's clients lost their broker
    assert max(seen) == 2, seen
    assert len(in_slurm()) == 4


def test_a_broker_from_a_slurm_gpu_file(tmp_path: Path) -> None:
    """The deprecated [slurm_gpu] table works with `broker serve`: translated once (one
    warning at start), kept as the broker's own rendering in its state directory, which every
    job is recorded with; the file can go once the broker runs."""
    name = f"old{tmp_path.name[-8:]}"
    old = tmp_path / "slurm-gpu.toml"
    old.write_text(
        "[slurm_gpu]\n"
        'partitions = ["main", "priority"]\n'
        "max_gpus = 2\nmax_time_minutes = 60\ndefault_time_minutes = 5\ngate_time_minutes = 5\n"
        f'job_name_prefix = "vbt-{name}-{os.getpid()}"\nmax_concurrent_jobs = 1\n'
    )
    broker = start_broker(tmp_path, name, config=old, env={"HOME": str(tmp_path)})
    try:
        rendering = tmp_path / "state" / "slurm-operator.toml"
        assert rendering.stat().st_mode & 0o777 == 0o600
        text = rendering.read_text()
        assert "[vibesys.agent_gpu]" in text and "[slurm_gpu]" not in text
        assert "max_concurrent_jobs = 1" in text
        old.unlink()
        code, out, _ = finish(broker.client("--gpus", "1", "--", "sh", "-c", "echo ran"))
        assert (code, out) == (0, "ran\n")
    finally:
        log = stop_broker(broker)
    assert log.count("deprecated") == 1, log
    [row] = journal_rows(broker)
    assert row["site_digest"] == hashlib.sha256(text.encode()).hexdigest()
