"""What a run was started with is what every process carries it on with, on the real cluster:
reconcile during a controller outage honours the unreachable timeout recorded with each run
(counted from the first unreachable observation in the journal); a parent's recorded retry
delay holds whoever submits its next attempt; its pending child, killed by Slurm with the
parent's failed job, is submitted again after the new attempt and runs once; and followers
(`wait`) interrupted in the background cancel nothing."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.hang_guard import wait_until
from tests.helpers.paths import ROOT
from tests.helpers.slurm import (
    cli,
    daemon_pid,
    fast_toml,
    frozen,
    history_text,
    job_output,
    leaves_the_queue,
    run_args,
    sacct_states,
    show,
    slurm,
    squeue_jobs,
    wait_for_state,
)

pytestmark = pytest.mark.slurm


def detached(cwd: Path, config: Path, *options: str, command: str) -> str:
    started = cli(*run_args("sbatch", config, "--detach", *options), "sh", "-c", command, cwd=cwd)
    assert started.returncode == 0, started.stderr
    return started.stdout.strip()


def reconciled(cwd: Path) -> tuple[int, dict[str, dict[str, Any]]]:
    done = cli("reconcile", "--json", cwd=cwd, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    shown = json.loads(done.stdout)
    assert shown["exit_status"] == done.returncode, shown
    return done.returncode, {row["invocation"]: row for row in shown["reconciled"]}


def test_reconcile_waits_out_an_outage_as_long_as_each_run_was_started_to(
    tmp_path: Path, slurm_cluster: dict[str, str]
) -> None:
    """Issue: `--unreachable-timeout 600 --detach`, then `reconcile` 3 s into a controller
    outage: UNRESOLVED, exit 4. Now every reconcile during the outage leaves that run as it is
    (exit 69, its row says until when); one started with a short timeout becomes UNRESOLVED
    once its time is spent, not before; both end DONE once the controller is back."""
    config = fast_toml(tmp_path)  # a frozen controller's squeue fails after 4 s
    command = "sleep 4; echo finished"
    patient = detached(tmp_path, config, "--unreachable-timeout", "600", command=command)
    hasty = detached(tmp_path, config, "--unreachable-timeout", "10", command=command)
    with frozen(daemon_pid(slurm_cluster, "slurmctld")):
        status, first = reconciled(tmp_path)
        assert status == 69 and all(first[i]["after"] == "RUNNING" for i in (patient, hasty))
        assert all(first[i]["waiting_until"] for i in (patient, hasty)), first
        since = {i: show(tmp_path, i) for i in (patient, hasty)}
        status, second = reconciled(tmp_path)  # about 5 s later: within both timeouts
        assert status == 69, second
        assert second[hasty]["after"] == "RUNNING", "never UNRESOLVED before its time"
        assert second[patient]["waiting_until"] == first[patient]["waiting_until"]
        until = datetime.fromisoformat(first[hasty]["waiting_until"])
        time.sleep(max(0.0, (until - datetime.now(until.tzinfo)).total_seconds()))
        status, third = reconciled(tmp_path)
        assert status == 4, third
        assert third[hasty]["after"] == "UNRESOLVED"
        assert (third[patient]["after"], third[patient]["waiting_until"]) == (
            "RUNNING",
            first[patient]["waiting_until"],
        )
    assert since[patient]["state"] == "RUNNING"
    for invocation in (patient, hasty):
        waited = cli("wait", invocation, cwd=tmp_path, timeout=120)
        assert waited.returncode == 0, waited.stderr
        inv = show(tmp_path, invocation)
        assert (inv["state"], inv["outcome"]) == ("DONE", "COMPLETED"), history_text(inv)
        assert len(inv["attempts"]) == 1 and job_output(inv) == "finished\n"
    events = [row["event"] for row in show(tmp_path, patient)["history"]]
    assert "OutcomeUnknown" not in events, "the patient run was never UNRESOLVED"


def start_waiter(cwd: Path, invocation: str) -> subprocess.Popen[str]:
    """`vibesys wait` in the background, as an agent starts it: no terminal, its own session."""
    return subprocess.Popen(
        [sys.executable, "-m", "vibesys", "wait", invocation],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_until_driven(cwd: Path, invocation: str, timeout: float = 30) -> None:
    """Until a process (a waiter that is up) holds the invocation's lease."""
    query = "SELECT lease_owner FROM invocations WHERE id=?"

    def driven() -> bool:
        with contextlib.closing(sqlite3.connect(cwd / ".vibesys" / "journal.db")) as db:
            return bool(db.execute(query, (invocation,)).fetchone()[0])

    wait_until(driven, timeout, f"a process to drive {invocation}", interval=0.2)


def stop(waiter: subprocess.Popen[str], signum: signal.Signals) -> str:
    waiter.send_signal(signum)
    _, stderr = waiter.communicate(timeout=30)
    assert waiter.returncode == 128 + signum, stderr
    assert "nothing was cancelled" in stderr and "Traceback" not in stderr
    return stderr


def test_a_retried_parent_keeps_its_child_and_its_recorded_delay(
    tmp_path: Path, slurm_toml: Path
) -> None:
    """The parent (`--retry-delay 25`) and its child (`--after`) are followed by `wait`s in
    the background; both are interrupted (SIGINT, SIGHUP): nothing is cancelled. Then, with
    no vibesys process left, the parent's job fails with NODE_FAIL: Slurm kills the child's
    pending job, which leaves the queue within seconds. A later `reconcile` records both;
    the next `wait` submits the parent's second attempt 25 s after the failure (the
    journal's times) and the child again after it, without spending a retry: it runs once."""
    counter = tmp_path / "child-ran"
    parent = detached(tmp_path, slurm_toml, "--retry-delay", "25", command="sleep 6; echo finished")
    child = detached(
        tmp_path,
        slurm_toml,
        "--after",
        parent,
        "--max-retries",
        "0",
        command=f"echo x >> {counter}",
    )
    first, child_first = f"vibesys-{parent}-1", f"vibesys-{child}-1"
    parent_waiter, child_waiter = start_waiter(tmp_path, parent), start_waiter(tmp_path, child)
    try:
        wait_for_state(first, ["RUNNING"])
        wait_for_state(child_first, ["PENDING"])
        wait_until_driven(tmp_path, parent)
        wait_until_driven(tmp_path, child)
        stop(parent_waiter, signal.SIGINT)
        stop(child_waiter, signal.SIGHUP)
    finally:
        for waiter in (parent_waiter, child_waiter):
            if waiter.poll() is None:
                waiter.kill()
    try:
        slurm("scontrol", "update", "nodename=node1", "state=down", "reason=vibesys-test")
        wait_for_state(first, ["NODE_FAIL"], timeout=20)
    finally:
        slurm("scontrol", "update", "nodename=node1", "state=resume")
    first_job = show(tmp_path, parent)["attempts"][0]["job_id"]
    gone = leaves_the_queue(child_first)
    print(f"the child's job left Slurm's queue {gone:.1f} s after its parent's NODE_FAIL was seen")
    assert squeue_jobs(child_first) == {show(tmp_path, child)["attempts"][0]["job_id"]: "CANCELLED"}
    for invocation in (parent, child):
        events = [row["event"] for row in show(tmp_path, invocation)["history"]]
        assert "CancelRequested" not in events, "a follower's interrupt never cancels"

    _, rows = reconciled(tmp_path)
    assert show(tmp_path, parent)["state"] == "RETRYING", rows[parent]
    shown = show(tmp_path, child)
    assert shown["state"] == "RETRYING", rows[child]
    assert "its job ended before it started" in rows[child]["evidence"]
    assert f"job {first_job} of {parent}, which it waited on, failed" in rows[child]["evidence"]
    assert [row["event"] for row in shown["history"]][-2:] == [
        "FenceIntended",
        "ParentAttemptFailed",
    ]

    waited = cli("wait", parent, cwd=tmp_path, timeout=180)
    assert waited.returncode == 0, waited.stderr
    inv = show(tmp_path, parent)
    attempts = [(a["attempt"], a["failure_class"]) for a in inv["attempts"]]
    assert attempts == [(1, "NODE_FAILED"), (2, "COMPLETED")], history_text(inv)
    at = {row["event"] + str(row["evidence"].get("attempt", "")): row for row in inv["history"]}
    failed = datetime.fromisoformat(at["InfraFailed"]["at"])
    not_before = datetime.fromisoformat(at["InfraFailed"]["evidence"]["not_before"])
    retried = datetime.fromisoformat(at["SubmitIntended2"]["at"])
    assert abs((not_before - failed).total_seconds() - 25) < 1, (failed, not_before)
    assert retried >= not_before, (not_before, retried)  # by another process than the failure's
    assert job_output(inv, 2) == "finished\n"
    assert sacct_states(first) == ["NODE_FAIL"]  # Slurm never requeued it itself

    waited = cli("wait", child, cwd=tmp_path, timeout=120)
    assert waited.returncode == 0, waited.stderr
    shown = show(tmp_path, child)
    assert (shown["outcome"], shown["retries"]) == ("COMPLETED", 0), history_text(shown)
    classes = [(a["failure_class"], a["provenance"]["after_job"]) for a in shown["attempts"]]
    assert classes == [
        ("DEPENDENCY_FAILED", inv["attempts"][0]["job_id"]),
        ("COMPLETED", inv["attempts"][1]["job_id"]),
    ], history_text(shown)
    assert counter.read_text() == "x\n", "the child ran once"
