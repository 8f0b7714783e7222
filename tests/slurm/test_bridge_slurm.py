"""`vibesys session serve` on the local Slurm cluster (the sbatch path, with the GPU broker of
the same session) and `vibesys-eval` end to end: the output streams while the job runs, the
result file, the command's exit status, artifacts brought home, capabilities; each service's
token opens only its own socket; teardown cancels a running evaluation in Slurm itself, and a
restarted session times out the job of a dead helper there."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.bridge.session_helpers import BUDGET, result_line, start_session
from tests.helpers.hang_guard import wait_until
from tests.helpers.slurm import UNFINISHED, slurm
from vibesys.bridge.capabilities import SessionCapabilities
from vibesys.broker import client as gpu_client

pytestmark = pytest.mark.slurm

#: The evaluations' job time is their timeout (whole minutes): the local cluster's default
#: partition allows 30 minutes, so the session's default timeout must fit it (a trusted
#: evaluation is sized by the site and its request, never clamped to fit).
SITE = ("--default-timeout", "600", "--slurm-config")
GPU_TIMEOUT = ("--gpus", "0", "--timeout-seconds", "5")


def test_an_evaluation_through_the_bridge_on_slurm(tmp_path: Path, slurm_toml: Path) -> None:
    go = tmp_path / "go"
    session = start_session(tmp_path, *SITE, str(slurm_toml))
    doc = session.document
    try:
        assert (doc["backend"], doc["cluster"]) == ("slurm", "local")
        env = doc["environment"]
        assert env["VIBESYS_GPU_TOKEN"].startswith("vbgpu1.") and env["CUDA_VISIBLE_DEVICES"] == ""
        script = (
            f"echo first; while [ ! -e {go} ]; do sleep 0.2; done; mkdir -p out; "
            "echo 42 > out/m.txt; echo second; exit 3"
        )
        result_file = tmp_path / "result.json"
        helper = session.helper(
            "--kind",
            "benchmark",
            "--artifact",
            "out/*.txt",
            "--result",
            str(result_file),
            "--",
            "sh",
            "-c",
            script,
        )
        assert helper.stdout is not None
        assert helper.stdout.readline() == "first\n"  # streamed while the job still runs
        go.touch()
        rest, err = helper.communicate(timeout=BUDGET)
        assert helper.returncode == 3, err
        assert rest == "second\n"
        result = json.loads(result_file.read_text())
        assert (result["status"], result["exit_code"], result["cluster_name"]) == (
            "APPLICATION_FAILED",
            3,
            "local",
        )
        assert result["remote_job_id"].isdigit() and result["provenance"]["site"] == "local"
        assert [(a["path"], a["size"]) for a in result["artifacts"]] == [("out/m.txt", 3)]
        copy = Path(result["results_dir"])
        assert (copy / "artifacts" / "out" / "m.txt").read_text() == "42\n"
        assert not (Path(doc["workspace"]) / "out").exists()  # nothing synced back
        caps = session.helper("capabilities")
        printed, _ = caps.communicate(timeout=BUDGET)
        capabilities = json.loads(printed)
        assert (capabilities["backend"], capabilities["gpu_commands"]) == ("slurm", True)
        limits = SessionCapabilities.model_validate_json(printed).gpu_limits
        assert limits is not None and (limits.max_gpus, limits.max_time_minutes) == (2, 120)
        assert [p.name for p in limits.partitions] == ["main", "priority"]
        notes = session.helper("capabilities", "--notes")
        printed, _ = notes.communicate(timeout=BUDGET)
        assert "vibesys-gpu --gpus N --time MINUTES" in printed and "`local`" in printed
        # Each token opens only its own service.
        swapped = session.helper("--", "true", VIBESYS_EVAL_TOKEN=env["VIBESYS_GPU_TOKEN"])
        _, err = swapped.communicate(timeout=BUDGET)
        assert swapped.returncode == 2 and "that is the GPU broker's token" in err
        gpu = subprocess.run(
            [sys.executable, gpu_client.__file__, "--gpus", "0", "--", "true"],
            env={**os.environ, **env, "VIBESYS_GPU_TOKEN": env["VIBESYS_EVAL_TOKEN"]},
            cwd=doc["workspace"],
            capture_output=True,
            text=True,
            timeout=BUDGET,
            check=False,
        )
        assert gpu.returncode == 2 and "that is the evaluation bridge's token" in gpu.stderr
    finally:
        status, err = session.stop()
    assert status == 0, err


def test_teardown_cancels_an_evaluation_in_slurm(tmp_path: Path, slurm_toml: Path) -> None:
    started = tmp_path / "started"
    session = start_session(tmp_path, *SITE, str(slurm_toml))
    helper = session.helper("--", "sh", "-c", f"touch {started}; sleep 120")
    wait_until(started.exists, BUDGET, "the job to start")
    status, err = session.stop(signal.SIGTERM)
    out, helper_err = helper.communicate(timeout=BUDGET)
    assert status == 0, err
    result = result_line(out)
    assert (helper.returncode, result["status"]) == (130, "CANCELLED"), helper_err
    job = result["remote_job_id"]
    states = slurm("squeue", "-h", "--states=all", "-j", job, "-o", "%T", check=False)
    assert not set(states.split()) & UNFINISHED  # Slurm shows it ended: nothing runs


def test_timeouts_end_at_the_second_not_at_the_minute(tmp_path: Path, slurm_toml: Path) -> None:
    """An 8 s evaluation timeout on a command that sleeps 120 s: the job's time limit is whole
    minutes (1; the rounding up is tests/bridge/test_site.py's), vibesys cancels it at 8 s,
    and the result is TIMEOUT. Meanwhile a GPU command of the same session with `vibesys-gpu
    --timeout-seconds 5` ends at 5 s, exit 124."""
    session = start_session(tmp_path, *SITE, str(slurm_toml))
    doc = session.document
    try:
        began = time.monotonic()
        helper = session.helper("--timeout", "8", "--", "sleep", "120")
        gpu_began = time.monotonic()
        gpu = subprocess.run(
            [
                sys.executable,
                gpu_client.__file__,
                "--gpus",
                "0",
                "--timeout-seconds",
                "5",
                "--",
                "sleep",
                "60",
            ],
            env={**os.environ, **doc["environment"]},
            cwd=doc["workspace"],
            capture_output=True,
            text=True,
            timeout=BUDGET,
            check=False,
        )
        gpu_took = time.monotonic() - gpu_began
        assert gpu.returncode == 124, gpu.stderr
        assert "[vibesys-gpu] TIMEOUT" in gpu.stderr and 5 <= gpu_took < 20, gpu_took
        out, err = helper.communicate(timeout=150)
        took = time.monotonic() - began
        result = result_line(out)
        assert (helper.returncode, result["status"]) == (124, "TIMEOUT"), err
        assert 8 <= took < 30, took  # at the second: not at 120 s, nor at the 1-minute limit
        job = result["remote_job_id"]
        limit = slurm("sacct", "-X", "-n", "-P", "-j", job, "-o", "Timelimit", check=False)
        assert limit.split()[:1] == ["00:01:00"]
    finally:
        status, err = session.stop()
    assert status == 0, err


def test_an_edited_site_file_changes_nothing_for_a_serving_session(
    tmp_path: Path, slurm_toml: Path
) -> None:
    """The session read and rendered slurm.toml when it started: every evaluation runs with
    that rendering, whatever the file says later (here another site name, then no file)."""
    session = start_session(tmp_path, *SITE, str(slurm_toml))
    original = slurm_toml.read_text()
    try:
        slurm_toml.write_text(original.replace('name = "local"', 'name = "edited"'))
        rc, out, err = session.evaluate("--", "sh", "-c", "echo edited-site")
        assert (rc, out.splitlines()[0]) == (0, "edited-site"), err
        assert result_line(out)["cluster_name"] == "local"
        slurm_toml.unlink()
        rc, out, err = session.evaluate("--", "true")
        assert rc == 0 and result_line(out)["provenance"]["site"] == "local", err
    finally:
        status, err = session.stop()
    assert status == 0, err


def test_links_loops_and_an_oversized_artifact_on_slurm(tmp_path: Path, slurm_toml: Path) -> None:
    """The red team's job on the node: the listing there never follows the links, refuses the
    sparse file by the session's own limit (recorded with the request), and the result
    arrives."""
    limit = 2 << 20
    session = start_session(tmp_path, *SITE, str(slurm_toml), extra=("--artifact-max", str(limit)))
    job = (
        "ln -s . a; ln -s . b; mkdir -p deep/x; echo 1 > result.json; echo 2 > deep/x/result.json; "
        "python3 -c \"open('big.bin', 'wb').truncate(300 << 20)\""
    )
    try:
        result_file = tmp_path / "result.json"
        started = time.monotonic()
        rc, _, err = session.evaluate(
            *("--artifact", "**/result.json", "--artifact", "*.bin"),
            *("--result", str(result_file), "--", "sh", "-c", job),
        )
        took = time.monotonic() - started
    finally:
        status, session_err = session.stop()
    assert rc == 0, err
    assert status == 0, session_err
    assert took < 120, f"the evaluation took {took:.0f} s"
    result = json.loads(result_file.read_text())
    assert sorted(a["path"] for a in result["artifacts"]) == ["deep/x/result.json", "result.json"]
    (problem,) = result["artifact_problems"]
    assert (problem["path"], problem["state"]) == ("big.bin", "refused")
    assert f"over the limit of {limit} bytes per artifact" in problem["detail"]
    shared = Path(result["results_dir"]) / "artifacts" / "result.json"
    local = next(a["local_path"] for a in result["artifacts"] if a["path"] == "result.json")
    assert os.stat(shared).st_ino == os.stat(local).st_ino


def test_a_restarted_session_times_out_a_dead_helpers_job_in_slurm(
    tmp_path: Path, slurm_toml: Path
) -> None:
    """The helper and the bridge SIGKILLed while a 120 s job runs under a 15 s timeout: the
    session restarted on the same state directory, with no helper, cancels the job in Slurm at
    its deadline (TIMEOUT, its result copied), and the campaign's next evaluation then runs."""
    started = tmp_path / "started"
    session = start_session(tmp_path, *SITE, str(slurm_toml))
    helper = session.helper("--timeout", "15", "--", "sh", "-c", f"touch {started}; sleep 120")
    wait_until(started.exists, BUDGET, "the job to start")
    began = time.monotonic()
    helper.kill()
    session.process.kill()
    helper.communicate(timeout=BUDGET)
    session.reap()
    again = start_session(tmp_path, *SITE, str(slurm_toml))
    try:
        rc, out, err = again.evaluate("--", "echo", "next")
        took = time.monotonic() - began
        assert rc == 0 and out.startswith("next\n"), err
        assert took < 15 + 20, took  # behind the timed-out job only, not its 120 s
        results = Path(again.document["results_dir"])
        (first,) = [
            json.loads((path / "result.json").read_text())
            for path in results.iterdir()
            if path.name != result_line(out)["invocation_id"] and not path.name.startswith(".")
        ]
        assert first["status"] == "TIMEOUT"
        states = slurm("squeue", "-h", "--states=all", "-j", first["remote_job_id"], "-o", "%T")
        assert not set(states.split()) & UNFINISHED
    finally:
        status, err = again.stop()
    assert status == 0, err
