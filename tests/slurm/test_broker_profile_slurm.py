"""`vibesys-gpu --profile NAME` through a real broker, real Slurm and real bwrap, with a real
profiler (py-spy, from its wheel): the capture comes back verified against the digest the
journal recorded, and py-spy's own format parses; the timeout ends it at the second and the
capture left in the job's directory goes once the job settled; a profiler the site does not
offer is refused in one line and submits nothing; a broker killed mid-capture leaves the capture
with its running job, and the next broker of the run carries it on as it starts (no cap, no
command needed): it cancels the recorded name and removes the capture only once Slurm shows the
job ended."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path

import msgspec
import pytest

from tests.helpers.hang_guard import wait_until
from tests.helpers.profilers import PROGRAM, profiler_tables
from tests.helpers.slurm import UNFINISHED, sacct_states
from tests.slurm.test_broker_slurm import (
    BUDGET,
    Broker,
    finish,
    journal_rows,
    start_broker,
    stop_broker,
)
from tests.slurm.test_broker_slurm import write_config as write_site

pytestmark = pytest.mark.slurm


def profiled_broker(
    root: Path,
    cap: int | None = None,
    run_id: str | None = None,
    journal: Path | None = None,
    remote: Path | None = None,
) -> Broker:
    root.mkdir(parents=True, exist_ok=True)
    prefix = f"vbt-prof-{root.name[-8:]}"
    remote = remote or root / "remote"
    config = write_site(root / "slurm.toml", remote, prefix, cap, '["main"]')
    config.write_text(config.read_text() + profiler_tables(root))
    started = start_broker(root, prefix, config=config, run_id=run_id, journal=journal)
    broker = msgspec.structs.replace(started, prefix=prefix)  # the site's, which names the jobs
    (broker.workspace / "busy.py").write_text(PROGRAM)
    return broker


def recorded_artifacts(broker: Broker) -> list[tuple[str, int, str, str, str]]:
    with sqlite3.connect(broker.journal) as db:
        rows = db.execute("SELECT path, size, sha256, state, local_path FROM artifacts").fetchall()
    return [(str(p), int(s), str(h), str(st), str(lp)) for p, s, h, st, lp in rows]


def left_in_job_dirs(broker: Broker) -> list[Path]:
    return sorted((broker.workspace.parent / "remote").glob("*/*/work/profile*"))


def test_a_profile_comes_back_verified_and_readable(tmp_path: Path) -> None:
    broker = profiled_broker(tmp_path)
    try:
        code, out, err = finish(
            broker.client("--gpus", "0", "--profile", "py-spy", "--", "python3", "busy.py", "2")
        )
        assert code == 0 and "spun" in out.splitlines(), err  # py-spy talks on stdout too
        capture = broker.workspace / "profile.json"
        data = capture.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        # The journal's record, made when the engine brought it home, is what the client checked;
        # the copy home stays in the state directory, the job directory's is the runtime's.
        ((path, size, sha256, state, local),) = recorded_artifacts(broker)
        assert (path, size, sha256, state) == ("profile.json", len(data), digest, "acknowledged")
        assert Path(local).read_bytes() == data and not left_in_job_dirs(broker)
        assert f"capture profile.json: {len(data)} bytes, sha256 {digest}" in err
        assert not list(broker.workspace.glob("*.part"))
        speedscope = json.loads(data)
        frames = {frame["name"] for frame in speedscope["shared"]["frames"]}
        samples = sum(len(profile["samples"]) for profile in speedscope["profiles"])
        assert "spin_here" in frames and samples > 100, (frames, samples)
    finally:
        stop_broker(broker)


def test_a_profiled_command_ends_at_its_timeout_and_an_unknown_profiler_is_refused(
    tmp_path: Path,
) -> None:
    broker = profiled_broker(tmp_path)
    try:
        began = time.monotonic()
        argv = ["--gpus", "0", "--profile", "early", "--timeout-seconds", "4", "--"]
        proc = broker.client(*argv, "python3", "busy.py", "60")
        wait_until(
            lambda: left_in_job_dirs(broker),
            BUDGET,
            "the capture in the job's directory",
            interval=0.1,
        )
        code, _, err = finish(proc)
        took = time.monotonic() - began
        assert code == 124, err
        assert "[vibesys-gpu] TIMEOUT" in err and 4 <= took < 15, (took, err)
        # The client hears of the end once the job settled: its capture in the job's directory
        # is gone by then, and Slurm shows nothing of it running.
        assert not left_in_job_dirs(broker)
        assert not set(broker.jobs().values()) & UNFINISHED
        jobs = broker.jobs()
        code, out, err = finish(broker.client("--gpus", "0", "--profile", "nsys", "--", "true"))
        assert (code, out) == (2, "")
        assert err == (
            "vibesys-gpu: refused: --profile nsys: this site offers no such profiler "
            "(offered: early, py-spy)\n"
        )
        assert broker.jobs() == jobs  # nothing submitted
    finally:
        stop_broker(broker)


def test_a_killed_brokers_capture_stays_until_its_job_is_gone(tmp_path: Path) -> None:
    """SIGKILL of the broker mid-capture: its job runs on, the capture with it; the next broker
    of the run (same run, same journal; no cap, no command of its own) carries it on as it
    starts: it cancels the recorded name, drives it until Slurm shows it ended, and only then
    removes the capture from the job's directory."""
    tag = str(os.getpid())  # the jobs' names: not those of an earlier run still in squeue
    run = f"prof-{tag}"
    first = profiled_broker(tmp_path / f"a{tag}", cap=1, run_id=run)
    proc = first.client("--gpus", "0", "--profile", "early", "--", "python3", "busy.py", "60")
    wait_until(
        lambda: left_in_job_dirs(first), BUDGET, "the capture in the job's dir", interval=0.1
    )
    first.process.kill()
    first.process.communicate(timeout=BUDGET)
    finish(proc)
    (name,) = first.jobs()
    assert left_in_job_dirs(first) and set(first.jobs().values()) & UNFINISHED
    # The site's jobs keep their files where the dead broker's did (the same remote root).
    remote = first.workspace.parent / "remote"
    second = profiled_broker(tmp_path / f"b{tag}", run_id=run, journal=first.journal, remote=remote)
    try:
        # What squeue says of the job the moment the capture is first seen gone.
        when_removed: list[str | None] = []

        def removed() -> bool:
            if left_in_job_dirs(first):
                return False
            when_removed.append(first.jobs().get(name))
            return True

        wait_until(removed, BUDGET, "the capture removed", interval=0.1)
        assert when_removed[0] not in UNFINISHED, when_removed
        assert sacct_states(name) == ["CANCELLED"]
        killed = next(row for row in journal_rows(first) if name.endswith(f"-{row['id']}-1"))
        assert (killed["state"], killed["outcome"]) == ("DONE", "CANCELLED")
        assert second.jobs() == {}  # nothing submitted
    finally:
        stop_broker(second)
