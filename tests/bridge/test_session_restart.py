"""A session restarted after its helper and its bridge were SIGKILLed carries on what they left,
with no helper: the evaluation ends TIMEOUT at the deadline counted from its first acceptance
(at once when that passed while nothing ran), its command is killed, its result is copied for
a later reattach, and the campaign's next evaluation runs as soon as it ends. A plain
`vibesys reconcile` enforces the same recorded deadline."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.bridge.helpers import Bridge, final
from tests.bridge.session_helpers import (
    BUDGET,
    HOST_VIEW,
    Session,
    result_line,
    start_session,
)
from tests.helpers.hang_guard import wait_until
from vibesys.bridge.files import read_result
from vibesys.bridge.runner import EvaluationRunner
from vibesys.job_result import job_result
from vibesys.journal_schema import open_journal

pytestmark = pytest.mark.timeout(120)

#: how late past its deadline a timed-out evaluation may be seen to end (cancel, kill, settle)
SLACK = 2.0


def sleeper(root: Path) -> tuple[str, ...]:
    """A long command that says when it started and under which pid (it `exec`s the sleep)."""
    return ("sh", "-c", f"echo $$ > {root / 'pid'}; exec sleep 60")


def started_pid(root: Path) -> int:
    """The sleeper's pid, once its line is whole (the shell creates the file, then writes)."""
    pid_file = root / "pid"
    wait_until(
        lambda: pid_file.exists() and pid_file.read_text().endswith("\n"),
        BUDGET,
        "the command to start",
    )
    return int(pid_file.read_text())


def kill_helper_and_bridge(session: Session, helper: subprocess.Popen[str]) -> None:
    helper.send_signal(signal.SIGKILL)
    session.process.send_signal(signal.SIGKILL)
    helper.communicate(timeout=BUDGET)
    session.reap()


def request(root: Path, request_id: str) -> tuple[str, datetime]:
    """The invocation id of a request and its deadline-carrying acceptance time."""
    journal = open_journal(root / ".vibesys" / "journal.db", readonly=True)
    try:
        row = journal.bridge.recorded_evaluation("campaign-1", request_id)
        assert row is not None
        return row.invocation_id, row.created_at
    finally:
        journal.close()


def timeout_cancels(root: Path, invocation_id: str) -> list[str]:
    journal = open_journal(root / ".vibesys" / "journal.db", readonly=True)
    try:
        history = journal.invocations.history(invocation_id)
    finally:
        journal.close()
    return [str(r.evidence.get("by")) for r in history if r.event == "CancelRequested"]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].split()[0] != "Z"


def wait_for_result(results: Path, invocation_id: str) -> tuple[dict[str, object], float]:
    """The copied result.json and when (wall clock) it was first seen."""
    path = results / invocation_id / "result.json"
    wait_until(path.exists, BUDGET, f"{path} to be written")
    seen = time.time()
    loaded: dict[str, object] = json.loads(path.read_text())
    return loaded, seen


def test_a_restarted_session_enforces_the_deadline_and_frees_the_queue_without_a_helper(
    tmp_path: Path,
) -> None:
    session = start_session(tmp_path, extra=HOST_VIEW)
    args = ("--request-id", "eval-1", "--timeout", "5", "--", *sleeper(tmp_path))
    helper = session.helper(*args)
    pid = started_pid(tmp_path)
    kill_helper_and_bridge(session, helper)
    invocation_id, accepted = request(tmp_path, "eval-1")
    deadline = accepted.timestamp() + 5
    assert time.time() < deadline - 0.5, "the test's setup took too long to prove anything"
    again = start_session(tmp_path, extra=HOST_VIEW)
    try:
        assert alive(pid)  # SIGKILLing the bridge did not end the evaluation
        nxt = again.helper("--request-id", "eval-2", "--", "sh", "-c", "echo next")
        result, seen = wait_for_result(Path(again.document["results_dir"]), invocation_id)
        assert result["status"] == "TIMEOUT"
        assert deadline - 0.2 <= seen <= deadline + SLACK, (seen - deadline, result)
        assert timeout_cancels(tmp_path, invocation_id) == ["timeout: 5 s"]
        wait_until(lambda: not alive(pid), BUDGET, "the timed-out command to be killed")
        # The next evaluation waited for the timed-out one only, not for its `sleep 60`.
        out, err = nxt.communicate(timeout=BUDGET)
        assert nxt.returncode == 0, err
        assert out.startswith("next\n") and result_line(out)["status"] == "COMPLETED"
        assert time.time() <= deadline + 2 * SLACK + 3
        # Its helper, back with the same request, gets the same invocation's result.
        rc, out, err = again.evaluate(*args)
        assert rc == 124, err
        back = result_line(out)
        assert (back["invocation_id"], back["status"]) == (invocation_id, "TIMEOUT")
    finally:
        status, err = again.stop()
    assert status == 0, err
    assert "carrying on 1 unfinished evaluation(s)" in err


def test_a_deadline_that_passed_while_nothing_ran_cancels_at_the_restart(tmp_path: Path) -> None:
    session = start_session(tmp_path, extra=HOST_VIEW)
    helper = session.helper("--request-id", "eval-1", "--timeout", "2", "--", *sleeper(tmp_path))
    pid = started_pid(tmp_path)
    kill_helper_and_bridge(session, helper)
    invocation_id, accepted = request(tmp_path, "eval-1")
    time.sleep(max(accepted.timestamp() + 2.5 - time.time(), 0.0))
    assert alive(pid)  # nothing enforced the deadline while the bridge was down
    again = start_session(tmp_path, extra=HOST_VIEW)
    restarted = time.time()
    try:
        result, seen = wait_for_result(Path(again.document["results_dir"]), invocation_id)
        assert result["status"] == "TIMEOUT"
        # At once: not a whole timeout counted again from the restart.
        assert seen - restarted < 1.5, seen - restarted
        assert timeout_cancels(tmp_path, invocation_id) == ["timeout: 2 s"]
        wait_until(lambda: not alive(pid), BUDGET, "the timed-out command to be killed")
    finally:
        status, err = again.stop()
    assert status == 0, err


@pytest.mark.parametrize("driver", ["reconcile", "wait"])
def test_whoever_drives_a_bridge_evaluation_enforces_its_recorded_deadline(
    tmp_path: Path, driver: str
) -> None:
    """No session comes back: `vibesys reconcile`, or a `vibesys wait` that drives it since
    nobody else does, cancels it past the deadline recorded with its request."""
    session = start_session(tmp_path, extra=HOST_VIEW)
    helper = session.helper("--request-id", "eval-1", "--timeout", "1", "--", *sleeper(tmp_path))
    pid = started_pid(tmp_path)
    kill_helper_and_bridge(session, helper)
    invocation_id, accepted = request(tmp_path, "eval-1")
    time.sleep(max(accepted.timestamp() + 1.2 - time.time(), 0.0))
    journal = str(tmp_path / ".vibesys" / "journal.db")
    if driver == "reconcile":
        argv = [sys.executable, "-m", "vibesys", "reconcile", "--journal", journal, "--json"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=BUDGET, check=False)
        assert done.returncode in (0, 4), done.stderr
        assert timeout_cancels(tmp_path, invocation_id) == ["timeout: 1 s"]
    # `wait` drives it to its end (the kill seen) and tells it as the bridge does: TIMEOUT.
    wait = [sys.executable, "-m", "vibesys", "wait", invocation_id, "--journal", journal]
    waited = subprocess.run(wait, capture_output=True, text=True, timeout=20, check=False)
    assert "DONE TIMEOUT" in waited.stderr, waited.stderr
    assert waited.returncode == 124, waited.stderr
    assert timeout_cancels(tmp_path, invocation_id) == ["timeout: 1 s"]
    assert not alive(pid)
    store = open_journal(Path(journal), readonly=True)
    try:
        inv = store.invocations.get(invocation_id)
        found = job_result(
            inv, store.invocations.attempts(inv.id), store.invocations.history(inv.id)
        )
    finally:
        store.close()
    assert found.status == "TIMEOUT"


def test_a_restart_copies_a_missing_result_and_leaves_an_unrecorded_request_to_its_helper(
    bridge: Bridge,
) -> None:
    """In the session's process: an ended evaluation whose result was never copied (a crash
    between its end and the copy) gets its copy; a request claimed but never recorded (a crash
    between the two commits) is not recorded by the restart (only its helper has the values of
    its variables), holds nobody up, and is recorded when its helper sends it again."""
    done = final(bridge.talk(bridge.body(request_id="r-1", argv=["echo", "one"])))
    first = done["result"]["invocation_id"]
    shutil.rmtree(bridge.results / first)
    body = bridge.body(request_id="r-2", argv=["echo", "two"])
    store = open_journal(bridge.journal_path)
    try:
        store.bridge.claim_evaluation(
            run_id="campaign-1",
            request_id="r-2",
            invocation_id="000000000000abcd",
            uid=os.getuid(),
            workspace=str(bridge.workspace),
            kind="accuracy",
            body={
                "run": "campaign-1",
                "workspace": str(bridge.workspace),
                "kind": "accuracy",
                "argv": ["echo", "two"],
                "timeout_seconds": None,
                "env": [],
                "artifacts": [],
                "effective_timeout_seconds": 600,
            },
            results_dir=str(bridge.results),
        )
    finally:
        store.close()
    restarted = EvaluationRunner(bridge.journal_path, bridge.runner.site, bridge.results, {})
    handles = restarted.resume("campaign-1")
    assert [handle.invocation_id for handle in handles] == [first]
    assert handles[0].done.wait(BUDGET) and handles[0].result is not None
    assert read_result(bridge.results / first / "result.json")["status"] == "COMPLETED"
    assert bridge.counts() == (2, 1)  # the unrecorded request stays so
    assert restarted.resume("campaign-1") == []  # nothing left to carry on
    again = final(bridge.talk(body))
    assert again["result"]["invocation_id"] == "000000000000abcd"
    assert again["result"]["status"] == "COMPLETED"


def test_another_session_of_the_campaign_enforces_the_deadline_of_its_queues_head(
    tmp_path: Path,
) -> None:
    """The dead session is not restarted: another session of the campaign (its own state
    directory, the same journal) does not take the evaluation over, but its own evaluation,
    waiting behind it, carries it on and cancels it at its recorded deadline."""
    session = start_session(tmp_path, extra=HOST_VIEW)
    helper = session.helper("--request-id", "eval-1", "--timeout", "2", "--", *sleeper(tmp_path))
    pid = started_pid(tmp_path)
    kill_helper_and_bridge(session, helper)
    invocation_id, accepted = request(tmp_path, "eval-1")
    other = start_session(tmp_path, extra=(*HOST_VIEW, "--state-dir", str(tmp_path / "other")))
    try:
        rc, out, err = other.evaluate("--", "sh", "-c", "echo next")
        assert rc == 0 and out.startswith("next\n"), err
        # Carried on at its deadline, its end seen a second later: not behind the `sleep 60`.
        assert time.time() < accepted.timestamp() + 2 + 8
        assert timeout_cancels(tmp_path, invocation_id) == ["timeout: 2 s"]
        wait_until(lambda: not alive(pid), BUDGET, "the timed-out command to be killed")
    finally:
        status, err = other.stop()
    assert status == 0, err
    assert "carrying on" not in err  # the other state directory's evaluations are not its own
