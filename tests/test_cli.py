"""The CLI contract, through the real `vibesys` command in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import vibesys_cli as cli
from tests.helpers.hang_guard import readline_within


def last_id(cwd: Path) -> str:
    out = cli("journal", "list", "--json", cwd=cwd)
    return str(json.loads(out.stdout)["invocations"][-1]["id"])


@pytest.mark.parametrize(
    ("script", "status"),
    [("exit 0", 0), ("exit 3", 3), ("kill -9 $$", 137), ("exit 255", 255)],
)
def test_run_exits_with_the_commands_status(tmp_path: Path, script: str, status: int) -> None:
    result = cli("run", "--", "sh", "-c", f"echo out; echo err >&2; {script}", cwd=tmp_path)
    assert result.returncode == status
    assert result.stdout == "out\n"
    assert result.stderr.startswith("err\n")
    assert f"exit {status}" in result.stderr
    assert (tmp_path / ".vibesys" / "journal.db").exists()


def test_run_json_is_journal_show_json(tmp_path: Path) -> None:
    result = cli(
        "run", "--json", "--name", "acc", "--", "sh", "-c", "echo hi; exit 4", cwd=tmp_path
    )
    assert result.returncode == 4
    shown = json.loads(result.stdout)
    assert "hi\n" in result.stderr  # the command's output does not pollute the JSON
    again = json.loads(cli("journal", "show", shown["id"][:6], "--json", cwd=tmp_path).stdout)
    # run --json adds the JobResult (journal show stays free of pydantic)
    assert shown.pop("result")["status"] == "APPLICATION_FAILED"
    assert shown == again
    for key in ("id", "state", "outcome", "exit_code", "adapter", "command", "attempts", "history"):
        assert key in shown
    assert shown["command"] == ["sh", "-c", "echo hi; exit 4"]
    assert (shown["state"], shown["outcome"], shown["exit_code"]) == (
        "DONE",
        "APPLICATION_FAILED",
        4,
    )
    assert set(shown["attempts"][0]) >= {"attempt", "job_name", "job_id", "failure_class"}
    assert set(shown["history"][0]) >= {"seq", "from", "to", "event", "at", "evidence"}
    assert shown["attempts"][0]["job_name"] == f"vibesys-{shown['id']}-1"


def test_output_streams_live(tmp_path: Path) -> None:
    # The job prints its second line only once the test has read the first: if output were
    # held back until the job ended, the first line could never arrive (a named hang guard,
    # and the job gives up waiting after 30 s).
    go = tmp_path / "go"
    job = f"echo first; for i in $(seq 600); do [ -e {go} ] && break; sleep 0.05; done; echo second"
    with subprocess.Popen(
        [sys.executable, "-m", "vibesys", "run", "--", "sh", "-c", job],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        try:
            assert readline_within(proc.stdout, 20, "the job's first line") == "first\n"
            assert proc.poll() is None, "the job is still waiting for the test"
        finally:
            go.touch()
        assert proc.wait(timeout=60) == 0
        assert proc.stdout.read() == "second\n"


def test_detach_then_wait_and_logs(tmp_path: Path) -> None:
    result = cli("run", "--detach", "--", "sh", "-c", "sleep 1; echo done; exit 6", cwd=tmp_path)
    assert result.returncode == 0
    inv = result.stdout.strip()
    shown = json.loads(cli("journal", "show", inv, "--json", cwd=tmp_path).stdout)
    assert shown["state"] == "RUNNING"
    waited = cli("wait", inv, cwd=tmp_path)
    assert waited.returncode == 6
    assert cli("logs", inv, cwd=tmp_path).stdout == "done\n"


def test_detach_json_prints_one_object(tmp_path: Path) -> None:
    result = cli("run", "--detach", "--json", "--", "sleep", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)  # one JSON object, not the bare id
    assert shown["state"] == "RUNNING" and shown["attempts"][0]["job_id"]
    assert shown["settings"]["unreachable_timeout_seconds"] == 600.0
    assert cli("wait", shown["id"], cwd=tmp_path).returncode == 0


def test_local_attempts_record_where_they_ran(tmp_path: Path) -> None:
    result = cli("run", "--json", "--", "sh", "-c", "sleep 1.2", cwd=tmp_path)
    [attempt] = json.loads(result.stdout)["attempts"]
    ran = attempt["provenance"]
    assert (ran["host"], ran["pid"]) == (os.uname().nodename, attempt["job_id"])
    assert ran["start"] < ran["end"], ran  # ISO times a second or more apart
    shown = cli("journal", "show", last_id(tmp_path), cwd=tmp_path).stdout
    assert f"ran on  end={ran['end']} host={ran['host']} pid={ran['pid']}" in shown


def test_interrupt_cancels_the_job_first(tmp_path: Path) -> None:
    marker = tmp_path / "finished"
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vibesys",
            "run",
            "--",
            "sh",
            "-c",
            f"echo started; sleep 30; touch {marker}",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None and proc.stdout.readline() == "started\n"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 130
    shown = json.loads(cli("journal", "show", last_id(tmp_path), "--json", cwd=tmp_path).stdout)
    assert (shown["state"], shown["outcome"]) == ("DONE", "CANCELLED")
    assert [h["event"] for h in shown["history"]][-3:] == [
        "CancelRequested",
        "Finished",
        "Collected",
    ]
    assert not marker.exists()


def test_cancel_from_another_process(tmp_path: Path) -> None:
    inv = cli("run", "--detach", "--", "sleep", "30", cwd=tmp_path).stdout.strip()
    result = cli("cancel", inv, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "CANCELLED" in result.stderr
    assert cli("wait", inv, cwd=tmp_path).returncode == 130


def test_logs_follow_streams_until_the_end(tmp_path: Path) -> None:
    inv = cli("run", "--detach", "--", "sh", "-c", "echo a; sleep 1; echo b", cwd=tmp_path)
    followed = cli("logs", "--follow", inv.stdout.strip(), cwd=tmp_path)
    assert followed.returncode == 0
    assert followed.stdout == "a\nb\n"


def test_reconcile_with_nothing_to_do(tmp_path: Path) -> None:
    cli("run", "--", "true", cwd=tmp_path)
    result = cli("reconcile", cwd=tmp_path)
    assert result.returncode == 0
    assert "nothing to reconcile" in result.stdout


def test_journal_list_filters_and_verify(tmp_path: Path) -> None:
    cli("run", "--", "true", cwd=tmp_path)
    cli("run", "--", "false", cwd=tmp_path)
    listed = json.loads(cli("journal", "list", "--state", "done", "--json", cwd=tmp_path).stdout)
    assert sorted(i["exit_code"] for i in listed["invocations"]) == [0, 1]
    assert listed["count"] == 2 and listed["counts"]["DONE"] == 2
    running = cli("journal", "list", "--state", "running", "--json", cwd=tmp_path).stdout
    assert json.loads(running) == {
        "invocations": [],
        "count": 0,
        "counts": dict.fromkeys(listed["counts"], 0),
    }
    verified = cli("journal", "verify", cwd=tmp_path)
    assert verified.returncode == 0 and "2 invocations" in verified.stdout


def test_journal_option_and_env(tmp_path: Path) -> None:
    custom = tmp_path / "elsewhere" / "j.db"
    assert cli("run", "--journal", str(custom), "--", "true", cwd=tmp_path).returncode == 0
    assert custom.exists() and not (tmp_path / ".vibesys").exists()
    listed = cli("journal", "list", cwd=tmp_path, env={"VIBESYS_JOURNAL": str(custom)})
    assert listed.returncode == 0 and "true" in listed.stdout


@pytest.mark.parametrize("fmt", ["mermaid", "dot"])
def test_states_diagram(tmp_path: Path, fmt: str) -> None:
    out = cli("states", "--format", fmt, cwd=tmp_path).stdout
    for state in (
        "PREPARED",
        "SUBMITTING",
        "RUNNING",
        "COLLECTING",
        "DONE",
        "RETRYING",
        "UNRESOLVED",
    ):
        assert state in out


def test_debug_failpoints_lists_one_per_line(tmp_path: Path) -> None:
    from vibesys.engine.failpoints import FAILPOINTS

    out = cli("debug", "failpoints", cwd=tmp_path).stdout.splitlines()
    assert out == list(FAILPOINTS)


# -- bad input: one line, exit 2, no traceback, nothing written -------------------------------


def assert_clean_failure(result: subprocess.CompletedProcess[str], needle: str) -> None:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert needle in result.stderr, result.stderr
    assert len([ln for ln in lines if "error" in ln.lower()]) == 1, result.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("run", "--adapter", "nosuch", "--", "true"), "nosuch"),
        (("run",), "no command"),
        (("run", "--max-retries", "-1", "--", "true"), "--max-retries"),
        (("journal", "show", "deadbeef"), "no journal"),
        (("journal", "list", "--state", "weird"), "weird"),
        (("states", "--format", "png"), "png"),
    ],
)
def test_bad_arguments(tmp_path: Path, args: tuple[str, ...], needle: str) -> None:
    assert_clean_failure(cli(*args, cwd=tmp_path), needle)
    assert not (tmp_path / ".vibesys").exists()


def test_unknown_failpoint_is_refused(tmp_path: Path) -> None:
    result = cli("run", "--", "true", cwd=tmp_path, env={"VIBESYS_FAILPOINTS": "nope"})
    assert_clean_failure(result, "nope")
    assert not (tmp_path / ".vibesys").exists()


def test_unknown_and_ambiguous_invocation(tmp_path: Path) -> None:
    for _ in range(20):
        cli("run", "--", "true", cwd=tmp_path)
    assert_clean_failure(cli("journal", "show", "zzzz", cwd=tmp_path), "unknown invocation")
    listed = json.loads(cli("journal", "list", "--json", cwd=tmp_path).stdout)
    ids = [i["id"] for i in listed["invocations"]]
    firsts = [i[0] for i in ids]
    shared = next(c for c in firsts if firsts.count(c) > 1)
    assert_clean_failure(cli("journal", "show", shared, cwd=tmp_path), "ambiguous")
    assert_clean_failure(cli("cancel", "zzzz", cwd=tmp_path), "unknown invocation")
    assert_clean_failure(cli("wait", "zzzz", cwd=tmp_path), "unknown invocation")


def test_not_a_journal(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.txt"
    bogus.write_text("hello, I am not a database\n" * 100)
    before = bogus.read_bytes()
    for args in (
        ("run", "--journal", str(bogus), "--", "true"),
        ("journal", "list", "--journal", str(bogus)),
        ("reconcile", "--journal", str(bogus)),
    ):
        assert_clean_failure(cli(*args, cwd=tmp_path), "not a vibesys journal")
    assert bogus.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_journal_from_a_newer_schema(tmp_path: Path) -> None:
    cli("run", "--", "true", cwd=tmp_path)
    path = tmp_path / ".vibesys" / "journal.db"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
            "VALUES ('vibesys', 'm999_from_the_future', 'later')"
        )
    conn.close()
    before = path.read_bytes()
    for args in (("run", "--", "true"), ("journal", "list"), ("reconcile",)):
        assert_clean_failure(cli(*args, cwd=tmp_path), "newer vibesys")
    assert path.read_bytes() == before


def test_help_loads_no_adapter(tmp_path: Path) -> None:
    code = (
        "import sys, runpy; sys.argv=['vibesys','--help']\n"
        "try:\n runpy.run_module('vibesys', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "light={'vibesys.adapters','vibesys.adapters.registry'}\n"
        "bad=[m for m in sys.modules if m.startswith(('paramiko','sky','vibesys.adapters',"
        "'vibesys.engine','vibesys.journal_schema','pydantic')) and m not in light]\n"
        "print('LOADED', bad)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ},
    ).stdout
    assert out.strip().endswith("LOADED []"), out


def test_run_help_shows_one_adapters_options(tmp_path: Path) -> None:
    sbatch = cli("run", "--adapter", "sbatch", "--help", cwd=tmp_path).stdout
    local = cli("run", "--adapter", "local", "--help", cwd=tmp_path).stdout
    everything = cli("run", "--help", cwd=tmp_path).stdout
    assert "--after" in sbatch and "--gpus" in sbatch
    assert "--after" not in local and "--gpus" not in local and "--journal" in local
    assert "--after" in everything and "--gpus" in everything
    assert "srun: a foreground srun job" in " ".join(everything.split())


def test_an_adapter_registered_in_one_line_appears_in_run_help() -> None:
    """Adding an adapter is a module plus one registry line; `run --help` lists it, with its
    own options, and `run --adapter NAME` accepts them."""
    from typer.testing import CliRunner

    from vibesys.adapters.registry import ADAPTERS, AdapterEntry, Option, register
    from vibesys.cli.app import app, refresh_run_options

    entry = AdapterEntry(
        "tiny",
        "a test adapter",
        "vibesys.adapters.fake",
        (Option("--tiny-knob", "tiny_knob", "A knob only tiny takes.", int),),
    )
    register(entry)
    try:
        refresh_run_options()
        shown = CliRunner().invoke(app, ["run", "--adapter", "tiny", "--help"], prog_name="vibesys")
        assert shown.exit_code == 0, shown.output
        assert "tiny: a test adapter" in " ".join(shown.output.split())
        assert "--tiny-knob" in shown.output and "--gpus" not in shown.output
        refused = CliRunner().invoke(
            app, ["run", "--tiny-knob", "3", "--", "true"], prog_name="vibesys"
        )
        assert refused.exit_code == 2
        assert "--tiny-knob is not an option of the local adapter" in refused.output
    finally:
        del ADAPTERS["tiny"]
        refresh_run_options()


def test_snapshot_dry_run_loads_no_adapter_or_site_configuration(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("print(1)\n")
    code = (
        "import sys, runpy; sys.argv=['vibesys','snapshot','--dry-run','.']\n"
        "try:\n runpy.run_module('vibesys', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "bad=[m for m in sys.modules if m.startswith(('vibesys.config','vibesys.adapters.'))"
        " and m != 'vibesys.adapters.registry']\n"
        "print('LOADED', bad)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
    ).stdout
    assert "a.py" in out and out.strip().endswith("LOADED []"), out
