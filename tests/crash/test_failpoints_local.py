"""Kill `vibesys run` at every failpoint (and at random moments), reconcile, and check that the
command ran exactly once, nothing was lost, and the recorded outcome is the true one."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.cli import vibesys_cli as cli
from tests.helpers.failpoints import CANCEL_FAILPOINTS, RUN_FAILPOINTS

pytestmark = pytest.mark.crash

#: What to read when `journal list` printed nothing (a journal killed before its schema).
NONE_LISTED = '{"invocations": []}'


def job_script(counter: Path, code: int, pause: float = 0.0) -> str:
    return f"echo ran >> {counter}; sleep {pause}; echo out; exit {code}"


def finish(cwd: Path) -> dict[str, object]:
    """Reconcile, then wait for whatever reconcile reattached; return the invocation."""
    reconciled = cli("reconcile", "--json", cwd=cwd)
    assert reconciled.returncode in (0, 4), reconciled.stderr
    assert json.loads(reconciled.stdout)["exit_status"] == reconciled.returncode
    listed = json.loads(cli("journal", "list", "--json", cwd=cwd).stdout)["invocations"]
    assert len(listed) == 1, "the invocation must not be lost"
    inv_id = str(listed[0]["id"])
    waited = cli("wait", inv_id, cwd=cwd)
    assert "Traceback" not in waited.stderr
    # Idempotent: a second reconcile changes nothing.
    before = cli("journal", "show", inv_id, "--json", cwd=cwd).stdout
    assert cli("reconcile", cwd=cwd).returncode == 0
    assert cli("journal", "show", inv_id, "--json", cwd=cwd).stdout == before
    verified = cli("journal", "verify", cwd=cwd)
    assert verified.returncode == 0, verified.stderr
    return dict(json.loads(before))


@pytest.mark.parametrize("point", RUN_FAILPOINTS)
def test_crash_at_failpoint_then_reconcile(tmp_path: Path, point: str) -> None:
    counter = tmp_path / "counter"
    crashed = cli(
        "run",
        "--",
        "sh",
        "-c",
        job_script(counter, 3),
        cwd=tmp_path,
        env={"VIBESYS_FAILPOINTS": point},
    )
    assert crashed.returncode == 137, crashed.stderr
    inv = finish(tmp_path)
    assert (inv["state"], inv["outcome"], inv["exit_code"]) == ("DONE", "APPLICATION_FAILED", 3)
    assert counter.read_text() == "ran\n", "the command must run exactly once"
    attempts = inv["attempts"]
    assert isinstance(attempts, list) and len(attempts) == 1


@pytest.mark.parametrize("point", CANCEL_FAILPOINTS)
def test_crash_while_cancelling(tmp_path: Path, point: str) -> None:
    counter = tmp_path / "counter"
    inv_id = cli(
        "run", "--detach", "--", "sh", "-c", job_script(counter, 0, 30), cwd=tmp_path
    ).stdout.strip()
    crashed = cli("cancel", inv_id, cwd=tmp_path, env={"VIBESYS_FAILPOINTS": point})
    assert crashed.returncode == 137
    inv = finish(tmp_path)
    assert (inv["state"], inv["outcome"]) == ("DONE", "CANCELLED")
    assert counter.read_text() == "ran\n"


def test_random_sigkill_then_reconcile(tmp_path: Path) -> None:
    rng = random.Random(os.environ.get("VIBESYS_CRASH_SEED", "7"))
    rounds = int(os.environ.get("VIBESYS_CRASH_ROUNDS", "8"))
    reconciled = 0
    for round_number in range(rounds):
        cwd = tmp_path / f"round{round_number}"
        cwd.mkdir()
        counter = cwd / "counter"
        with subprocess.Popen(
            [sys.executable, "-m", "vibesys", "run", "--", "sh", "-c", job_script(counter, 5, 0.2)],
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ) as proc:
            # Half the rounds kill at any moment from the start (the journal may not exist
            # yet); the others once the invocation is recorded, somewhere in its run.
            if round_number % 2:
                wait_for_journal(cwd, proc)
            time.sleep(rng.uniform(0.0, 0.6))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        listed = (
            json.loads(cli("journal", "list", "--json", cwd=cwd).stdout or NONE_LISTED)[
                "invocations"
            ]
            if (cwd / ".vibesys" / "journal.db").exists()
            else []
        )
        if not listed:
            assert not counter.exists(), "a command ran with no invocation recorded"
            continue
        inv = finish(cwd)
        reconciled += 1
        assert (inv["state"], inv["exit_code"]) == ("DONE", 5), inv
        assert counter.read_text() == "ran\n"
    # Kills before the journal exists prove little: at least the recorded rounds reconciled.
    assert reconciled >= rounds // 2, f"only {reconciled} of {rounds} rounds reconciled"


def wait_for_journal(cwd: Path, proc: subprocess.Popen[bytes]) -> None:
    """Until the invocation is recorded (the journal's file appears empty a moment before its
    schema: the first run of a project creates it under the write lock)."""
    journal = cwd / ".vibesys" / "journal.db"
    deadline = time.monotonic() + 30
    while proc.poll() is None and not recorded(journal):
        assert time.monotonic() < deadline, "vibesys run never recorded its invocation"
        time.sleep(0.01)


def recorded(journal: Path) -> bool:
    if not journal.exists():
        return False
    try:
        with contextlib.closing(sqlite3.connect(f"file:{journal}?mode=ro", uri=True)) as conn:
            return bool(conn.execute("SELECT count(*) FROM invocations").fetchone()[0])
    except sqlite3.Error:
        return False


def test_crash_after_the_dispatch_fences_the_attempt_and_runs_once(tmp_path: Path) -> None:
    """After SubmitDispatched the submit may have happened: reconcile does not submit the same
    attempt again on silence, it fences it, and the next attempt runs the command once."""
    counter = tmp_path / "counter"
    crashed = cli(
        "run",
        "--",
        "sh",
        "-c",
        job_script(counter, 3),
        cwd=tmp_path,
        env={"VIBESYS_FAILPOINTS": "after_submit_dispatch"},
    )
    assert crashed.returncode == 137, crashed.stderr
    inv = finish(tmp_path)
    assert (inv["state"], inv["outcome"], inv["exit_code"]) == ("DONE", "APPLICATION_FAILED", 3)
    assert counter.read_text() == "ran\n"
    attempts = inv["attempts"]
    assert isinstance(attempts, list) and len(attempts) == 2
    assert "kind=fence" in str(attempts[0]["claim"])
