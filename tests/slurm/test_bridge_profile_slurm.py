"""`vibesys-eval --kind profile --profiler NAME` through a real session on the local Slurm
cluster (the sbatch path) with a real profiler (py-spy, from its wheel): the capture comes home
as a verified artifact in the results directory and py-spy's own format parses; capabilities
and the notes offer the profilers; a profiler the session does not offer is refused in one line
and submits nothing; the timeout ends a profile at the second; a cancel mid-capture returns
once Slurm shows the job ended, and nothing of the capture was removed."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.bridge.session_helpers import BUDGET, Session, result_line, start_session
from tests.helpers.hang_guard import wait_until
from tests.helpers.profilers import PROGRAM, profiler_tables
from tests.helpers.slurm import UNFINISHED, slurm, write_slurm_toml

pytestmark = pytest.mark.slurm

CAPTURE = "vibesys-profile.json"


def profiled_session(root: Path) -> Session:
    config = write_slurm_toml(root / "slurm.toml", root / "remote")
    config.write_text(config.read_text() + profiler_tables(root))
    session = start_session(root, "--default-timeout", "600", "--slurm-config", str(config))
    (Path(session.document["workspace"]) / "busy.py").write_text(PROGRAM)
    return session


def captures_in_job_dirs(root: Path) -> list[Path]:
    # os.walk, not glob: a stage's scratch copy may vanish while the tree is read.
    return sorted(
        Path(top) / CAPTURE
        for top, _, files in os.walk(root / "remote")
        if Path(top).name == "work" and CAPTURE in files
    )


def job_states(job: str) -> set[str]:
    return set(slurm("squeue", "-h", "--states=all", "-j", job, "-o", "%T", check=False).split())


def test_a_profile_comes_home_verified_and_readable(tmp_path: Path) -> None:
    session = profiled_session(tmp_path)
    try:
        caps = json.loads(session.evaluate("capabilities")[1])
        assert (caps["profilers"], caps["remote_profiling"]) == (["early", "py-spy"], True)
        assert "profile" in caps["kinds"]
        notes = session.evaluate("capabilities", "--notes")[1]
        assert "vibesys-eval --kind profile --profiler NAME -- COMMAND" in notes
        argv = ("--kind", "profile", "--profiler", "py-spy", "--", "python3", "busy.py", "2")
        # A file of the capture's name in the workspace (planted, stale): the snapshot leaves
        # it out, so what comes home is the profiler's capture, and the planted file stays.
        planted = Path(session.document["workspace"]) / CAPTURE
        planted.write_text("{}")
        code, out, err = session.evaluate(*argv)
        assert code == 0 and "spun" in out.splitlines(), err
        result = result_line(out)
        ((artifact),) = result["artifacts"]
        copy = Path(result["results_dir"]) / "artifacts" / CAPTURE
        data = copy.read_bytes()
        assert (artifact["path"], artifact["size"]) == (CAPTURE, len(data))
        assert artifact["sha256"] == hashlib.sha256(data).hexdigest()
        speedscope = json.loads(data)
        frames = {frame["name"] for frame in speedscope["shared"]["frames"]}
        samples = sum(len(profile["samples"]) for profile in speedscope["profiles"])
        assert "spin_here" in frames and samples > 100, (frames, samples)
        assert planted.read_text() == "{}"  # nothing synced back
        jobs = slurm("squeue", "-h", "--states=all", "-o", "%i")
        code, out, err = session.evaluate("--kind", "profile", "--profiler", "nsys", "--", "true")
        assert (code, out) == (2, "")
        assert err == (
            "vibesys-eval: refused: --profiler nsys: this session offers no such profiler "
            "(offered: early, py-spy)\n"
        )
        assert slurm("squeue", "-h", "--states=all", "-o", "%i") == jobs  # nothing submitted
    finally:
        status, err = session.stop()
    assert status == 0, err


def test_a_profile_ends_at_its_timeout_and_a_cancel_settles_before_it_returns(
    tmp_path: Path,
) -> None:
    session = profiled_session(tmp_path)
    try:
        began = time.monotonic()
        profile = ("--kind", "profile", "--profiler", "early")
        code, out, err = session.evaluate(
            *profile, "--timeout", "4", "--", "python3", "busy.py", "60"
        )
        took = time.monotonic() - began
        result = result_line(out)
        assert (code, result["status"]) == (124, "TIMEOUT"), err
        assert 4 <= took < 15, took
        assert not job_states(result["remote_job_id"]) & UNFINISHED
        assert len(captures_in_job_dirs(tmp_path)) == 1  # kept where the job wrote it
        # A cancel mid-capture: the helper hears the result once Slurm shows the job ended.
        helper = session.helper(*profile, "--", "python3", "busy.py", "60")
        wait_until(
            lambda: len(captures_in_job_dirs(tmp_path)) == 2,
            BUDGET,
            "the capture in the job's directory",
            interval=0.1,
        )
        helper.send_signal(signal.SIGINT)
        out, err = helper.communicate(timeout=BUDGET)
        result = result_line(out)
        assert (helper.returncode, result["status"]) == (130, "CANCELLED"), err
        assert not job_states(result["remote_job_id"]) & UNFINISHED
        assert len(captures_in_job_dirs(tmp_path)) == 2  # nothing removed under the job
    finally:
        status, err = session.stop()
    assert status == 0, err
