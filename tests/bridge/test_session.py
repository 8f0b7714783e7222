"""`vibesys session serve` and `vibesys-eval` as a framework runs them (local site, real
processes and sockets): the document, streaming, the result file, exit statuses, capabilities;
a bridge SIGKILLed while an evaluation is submitting and while it runs, restarted, the helper
reattaching to the same invocation (exactly one run); teardown after success, failure, cancel,
a partial start and the parent's death."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.bridge.helpers import Tricklers
from tests.bridge.session_helpers import (
    BUDGET,
    HOST_VIEW,
    result_line,
    serve_argv,
    start_session,
)
from tests.helpers.hang_guard import wait_until
from vibesys.bridge.capabilities import SessionCapabilities
from vibesys.bridge.notes import render_notes

pytestmark = pytest.mark.timeout(240)


def leftovers(state: Path) -> list[str]:
    """What teardown must not leave: sockets, tokens, the container's environment file."""
    return sorted(
        str(p.relative_to(state))
        for p in state.rglob("*")
        if p.is_socket() or p.name in ("eval-token", "gpu-token", "container.env")
    )


def test_a_session_end_to_end(tmp_path: Path) -> None:
    session = start_session(tmp_path, "--local", extra=("--allow-env", "SEED"))
    doc = session.document
    try:
        assert doc["backend"] == "local" and doc["gpu"] is None and doc["run_id"] == "campaign-1"
        env = doc["environment"]
        assert env["VIBESYS_EVAL_TOKEN"].startswith("vbeval1.")
        assert Path(doc["bridge"]["token_file"]).read_text().strip() == env["VIBESYS_EVAL_TOKEN"]
        assert Path(doc["bridge"]["token_file"]).stat().st_mode & 0o777 == 0o600
        assert Path(doc["bridge"]["socket"]).parent.stat().st_mode & 0o777 == 0o700
        assert Path(doc["env_file"]).read_text().count("\n") == len(env)
        rc, out, err = session.evaluate(
            "--env", "SEED", "--", "sh", "-c", "echo seed=$SEED; echo warn >&2; exit 3", SEED="7"
        )
        assert rc == 3, err
        assert out.splitlines()[0] == "seed=7" and "warn" in err
        result = result_line(out)
        assert (result["status"], result["exit_code"]) == ("APPLICATION_FAILED", 3)
        result_file = tmp_path / "r.json"
        rc, out, _ = session.evaluate("--result", str(result_file), "--", "printf", "no newline")
        assert (rc, out) == (0, "no newline")
        assert json.loads(result_file.read_text())["status"] == "COMPLETED"
        rc, out, err = session.evaluate("--env", "HOME", "--", "true")
        assert rc == 2 and "refused: variable HOME is not one the operator lets" in err
        caps = session.helper("capabilities")
        printed, _ = caps.communicate(timeout=BUDGET)
        capabilities = json.loads(printed)
        assert capabilities["backend"] == "local" and capabilities["remote_profiling"] is False
        assert capabilities["env"] == ["SEED"] and capabilities["kinds"] == [
            "accuracy",
            "benchmark",
        ]
        assert capabilities["nodes"] == 1 and capabilities["accelerators_per_node"] == 0
        assert capabilities["local_confined"] is True  # --local alone: confined
        typed = SessionCapabilities.model_validate_json(printed)  # the reply is the model
        assert typed.results_dir == doc["results_dir"] and typed.workspace == doc["workspace"]
        notes = session.helper("capabilities", "--notes")
        printed, err = notes.communicate(timeout=BUDGET)
        assert notes.returncode == 0, err
        assert printed == render_notes(typed) and printed.startswith("# Runtime notes\n")
    finally:
        status, err = session.stop()
    assert status == 0, err
    assert "tearing down: SIGTERM received" in err and "torn down" in err
    assert leftovers(tmp_path / "state") == []
    assert len(list((tmp_path / "state" / "results").iterdir())) == 2  # results stay


def test_exit_statuses_for_lost_and_refused(tmp_path: Path) -> None:
    session = start_session(tmp_path)
    session.stop()
    env = {"VIBESYS_EVAL_SOCKET": str(tmp_path / "none.sock"), "VIBESYS_EVAL_TOKEN": "vbeval1.x"}
    lost = subprocess.run(
        [
            sys.executable,
            str(Path(session.document["bridge"]["client"])),
            "--retry-seconds",
            "0.5",
            "--",
            "true",
        ],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=BUDGET,
        check=False,
    )
    assert lost.returncode == 255 and "gave up after 0.5 s" in lost.stderr
    unset = subprocess.run(
        [sys.executable, str(Path(session.document["bridge"]["client"])), "--", "true"],
        env={k: v for k, v in os.environ.items() if not k.startswith("VIBESYS_")},
        capture_output=True,
        text=True,
        timeout=BUDGET,
        check=False,
    )
    assert unset.returncode == 2 and "VIBESYS_EVAL_SOCKET" in unset.stderr


def test_a_profile_is_refused_in_one_line_where_no_profiler_is_offered(tmp_path: Path) -> None:
    session = start_session(tmp_path)
    try:
        code, out, err = session.evaluate("--kind", "profile", "--profiler", "py-spy", "--", "true")
        assert (code, out) == (2, "")
        assert err == (
            "vibesys-eval: refused: --profiler py-spy: this session offers no such profiler "
            "(offered: none)\n"
        )
        code, out, err = session.evaluate("--profiler", "py-spy", "--", "true")
        assert (code, out) == (2, "") and "--kind profile and --profiler NAME go together" in err
        assert "Traceback" not in err
    finally:
        status, err = session.stop()
    assert status == 0, err


@pytest.mark.parametrize(
    ("failpoint", "attempt"),
    [
        ("after_submit_dispatch", 2),  # dispatched, nothing launched: fenced, run again
        ("after_submit_effect", 1),  # launched, its id not recorded: found by its claim
    ],
)
def test_a_bridge_killed_while_submitting_is_restarted_and_runs_it_once(
    tmp_path: Path, failpoint: str, attempt: int
) -> None:
    marker = tmp_path / "runs.txt"
    session = start_session(tmp_path, extra=HOST_VIEW, env={"VIBESYS_FAILPOINTS": failpoint})
    helper = session.helper(
        "--request-id", "eval-1", "--", "sh", "-c", f"echo run >> {marker}; echo done"
    )
    assert session.reap()[0] == 137  # stopped dead at the failpoint
    again = start_session(tmp_path, extra=HOST_VIEW)
    try:
        out, err = helper.communicate(timeout=BUDGET)
        assert helper.returncode == 0, err
        assert "trying again with the same request id" in err
        result = result_line(out)
        assert (result["status"], result["attempt"]) == ("COMPLETED", attempt)
        assert marker.read_text() == "run\n"  # exactly one run
        assert out.count("done\n") == 1
    finally:
        status, err = again.stop()
    assert status == 0, err


def test_a_bridge_killed_while_it_runs_is_restarted_and_reattaches(tmp_path: Path) -> None:
    marker = tmp_path / "runs.txt"
    session = start_session(tmp_path, extra=HOST_VIEW)
    script = f"echo run >> {marker}; echo before; sleep 2; echo after"
    helper = session.helper("--request-id", "eval-2", "--", "sh", "-c", script)
    wait_until(lambda: marker.exists(), BUDGET, "the command to start")
    session.process.kill()
    session.reap()
    again = start_session(tmp_path, extra=HOST_VIEW)
    try:
        out, err = helper.communicate(timeout=BUDGET)
        assert helper.returncode == 0, err
        result = result_line(out)
        assert result["status"] == "COMPLETED" and result["attempt"] == 1
        assert marker.read_text() == "run\n"
        assert out.count("before\n") == 1 and out.count("after\n") == 1
    finally:
        again.stop()


def test_teardown_cancels_a_running_evaluation_and_tells_its_helper(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    session = start_session(tmp_path, extra=HOST_VIEW)
    helper = session.helper("--", "sh", "-c", f"touch {marker}; sleep 60")
    wait_until(lambda: marker.exists(), BUDGET, "the command to start")
    status, err = session.stop(signal.SIGINT)
    out, helper_err = helper.communicate(timeout=BUDGET)
    assert status == 0, err
    assert helper.returncode == 130, helper_err
    assert (
        "[vibesys-eval] the session is shutting down (SIGINT received); the evaluation is "
        "cancelled" in helper_err
    )
    result = result_line(out)
    assert result["status"] == "CANCELLED"
    assert "session teardown: SIGINT received" in result["reason"]
    assert leftovers(tmp_path / "state") == []


def test_an_interrupted_helper_cancels_its_evaluation(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    session = start_session(tmp_path, extra=HOST_VIEW)
    try:
        helper = session.helper("--", "sh", "-c", f"touch {marker}; sleep 60")
        wait_until(lambda: marker.exists(), BUDGET, "the command to start")
        helper.send_signal(signal.SIGINT)
        out, err = helper.communicate(timeout=BUDGET)
        assert helper.returncode == 130, err
        assert "interrupted: cancelling the evaluation" in err
        assert result_line(out)["status"] == "CANCELLED"
    finally:
        session.stop()


def test_a_partial_start_is_torn_down(tmp_path: Path) -> None:
    # A site with GPU commands: the bridge starts, then the broker cannot (its socket's path
    # is taken by something that is not a socket). Everything started is undone.
    config = tmp_path / "slurm.toml"
    config.write_text(
        "[slurm]\nname = 'local'\nremote_workspace_root = '/tmp'\n[slurm.transport]\n"
        "kind = 'local'\n[vibesys.agent_gpu]\npartitions = ['main']\nmax_gpus = 1\n"
        "max_time_minutes = 5\ndefault_time_minutes = 1\n"
    )
    (tmp_path / "ws").mkdir()
    (tmp_path / "state" / "gpu").mkdir(parents=True)
    (tmp_path / "state" / "gpu" / "gpu.sock").mkdir()
    done = subprocess.run(
        serve_argv(tmp_path, "--slurm-config", str(config)),
        capture_output=True,
        text=True,
        timeout=BUDGET,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines()[-1].startswith("vibesys: error: ")
    assert "tearing down: the start failed" in done.stderr
    assert leftovers(tmp_path / "state") == []


def test_the_parents_death_ends_the_session(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    doc = tmp_path / "doc.json"
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            f"subprocess.Popen(sys.argv[1:], stdout=open({str(doc)!r}, 'w'),"
            f" stderr=open({str(tmp_path / 'err')!r}, 'w'))\n"
            "time.sleep(600)\n",
            *serve_argv(tmp_path, "--local"),
        ],
        cwd=tmp_path,
    )
    try:
        wait_until(lambda: doc.exists() and doc.read_text().endswith("}\n"), BUDGET, "the document")
        pid = json.loads(doc.read_text())["pid"]
        parent.kill()
        parent.wait(timeout=BUDGET)
        wait_until(lambda: not _alive(pid), BUDGET, "the session to end")
    finally:
        if parent.poll() is None:
            parent.kill()
    err = (tmp_path / "err").read_text()
    assert f"tearing down: the parent process {parent.pid} is gone" in err
    assert leftovers(tmp_path / "state") == []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].split()[0]
    return status != "Z"


def test_bad_input_is_one_line_and_starts_nothing(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    for extra, needle in (
        (("--profile", "x", "--local"), "name one site"),
        (("--local", "--allow-env", "SLURM_JOB_ID"), "--allow-env SLURM_JOB_ID: a SLURM_"),
        (("--local", "--run-id", "a b"), "--run-id 'a b'"),
        (("--profile", "x", "--unconfined"), "--unconfined applies to --local only"),
    ):
        argv = serve_argv(tmp_path, *extra)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=BUDGET, check=False)
        assert done.returncode == 2, done.stderr
        assert needle in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
    assert not (tmp_path / "state").exists()


def test_a_second_session_on_the_same_state_is_refused(tmp_path: Path) -> None:
    session = start_session(tmp_path)
    try:
        done = subprocess.run(
            serve_argv(tmp_path, "--local"),
            capture_output=True,
            text=True,
            timeout=BUDGET,
            check=False,
        )
        assert done.returncode == 2
        assert "another session serves from this state directory" in done.stderr
        assert Path(session.document["bridge"]["token_file"]).exists()  # untouched
    finally:
        session.stop()


def test_a_session_refuses_to_start_on_a_site_whose_check_fails(tmp_path: Path) -> None:
    """`session serve` runs `vibesys check` first: a site whose Slurm commands cannot run (here
    a transport whose shell fails every command) is refused in one line naming the failed
    check and its fix, before anything listens or is recorded."""
    (tmp_path / "ws").mkdir()
    config = tmp_path / "slurm.toml"
    config.write_text(
        '[slurm]\nname = "broken"\n'
        f'remote_workspace_root = "{tmp_path / "remote"}"\n\n'
        '[slurm.transport]\nkind = "local"\nshell_command = ["false"]\n'
    )
    done = subprocess.run(
        serve_argv(tmp_path, "--slurm-config", str(config)),
        capture_output=True,
        text=True,
        timeout=BUDGET,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "the site is not ready: site check" in lines[0], lines[0]
    assert "fix:" in lines[0], lines[0]
    assert not (tmp_path / "state" / "socket").exists()
    assert not (tmp_path / ".vibesys" / "journal.db").exists()


def test_a_campaigns_evaluations_run_one_at_a_time_in_order_across_a_restart(
    tmp_path: Path,
) -> None:
    """Three helpers of one campaign: the first runs, the others are told their position and
    wait; the bridge is killed and restarted meanwhile, and the order is kept."""
    from vibesys.journal_schema import open_journal

    log = tmp_path / "order.txt"
    journal = tmp_path / ".vibesys" / "journal.db"

    def script(n: int) -> str:
        gate = tmp_path / f"gate-{n}"
        wait = f"while [ ! -e {gate} ]; do sleep 0.1; done"
        return f"echo start-{n} >> {log}; {wait}; echo end-{n} >> {log}"

    def queued() -> int:
        store = open_journal(journal, readonly=True)
        try:
            return int(store.conn.execute("SELECT count(*) FROM campaign_queue").fetchone()[0])
        finally:
            store.close()

    session = start_session(tmp_path, extra=HOST_VIEW)
    helpers = []
    for n in (1, 2, 3):
        helpers.append(session.helper("--request-id", f"eval-{n}", "--", "sh", "-c", script(n)))
        wait_until(
            lambda n=n: journal.exists() and queued() == n, BUDGET, f"evaluation {n} to be recorded"
        )
    wait_until(lambda: log.exists(), BUDGET, "the first evaluation to start")
    session.process.kill()
    session.reap()
    again = start_session(tmp_path, extra=HOST_VIEW)
    try:
        time.sleep(2)  # the helpers reattach (and are told their positions) while the first runs
        (tmp_path / "gate-1").touch()
        wait_until(lambda: "start-2" in log.read_text(), BUDGET, "the second evaluation to start")
        assert "start-3" not in log.read_text()  # one at a time: the third still waits
        (tmp_path / "gate-3").touch()
        (tmp_path / "gate-2").touch()
        outcomes = [helper.communicate(timeout=BUDGET) for helper in helpers]
        for helper, (out, err) in zip(helpers, outcomes, strict=True):
            assert helper.returncode == 0, err
            assert result_line(out)["status"] == "COMPLETED"
        assert log.read_text().split() == [
            "start-1",
            "end-1",
            "start-2",
            "end-2",
            "start-3",
            "end-3",
        ]
        assert "queued: 1 evaluation of the campaign ahead" in outcomes[1][1]
        assert "queued: 2 evaluations of the campaign ahead" in outcomes[2][1]
    finally:
        status, err = again.stop()
    assert status == 0, err


def test_trickling_peers_neither_starve_a_helper_nor_hold_up_the_teardown(
    tmp_path: Path,
) -> None:
    """The issue's attack with the session's own limits: 80 peers that send a bad line or a
    line without its end, then a byte every 0.2 s; a real helper still gets its result, and
    SIGTERM with peers trickling (and connecting again) ends well within the budget (30 s)."""
    session = start_session(tmp_path)
    path = Path(session.env["VIBESYS_EVAL_SOCKET"])
    bad = Tricklers(path, 40, b"GET / HTTP/1.0\r\n\r\n")
    partial = Tricklers(path, 40, b'{"version": 1, "token": "vbeval1.')
    again: Tricklers | None = None
    try:
        started = time.monotonic()
        rc, out, err = session.evaluate("--", "sh", "-c", "echo judged")
        assert rc == 0, err
        assert out.startswith("judged\n") and result_line(out)["status"] == "COMPLETED"
        assert time.monotonic() - started < 20  # a line is due 5 s after its accept
        again = Tricklers(path, 80, b'{"version": 1, "op": ', again=True)
        time.sleep(0.5)
        stopping = time.monotonic()
        status, err = session.stop()
        assert status == 0, err
        assert time.monotonic() - stopping < 10, err
    finally:
        for peers in (bad, partial, again):
            if peers is not None:
                peers.close()
        if session.process.poll() is None:
            session.process.kill()
