"""The local adapter through the real command line, under stalls and lost context: a frozen
wrapper is not a dead one, an attempt runs in the context recorded at PREPARED whoever submits
it, cancel proves the end even when the supervisor died, and following is not owning."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.cli import vibesys_cli as cli
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.crash


def show(cwd: Path, inv_id: str, journal: Path | None = None) -> dict[str, object]:
    extra = ["--journal", str(journal)] if journal else []
    out = cli("journal", "show", inv_id, "--json", *extra, cwd=cwd)
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def only_id(cwd: Path) -> str:
    listed = json.loads(cli("journal", "list", "--json", cwd=cwd).stdout)["invocations"]
    assert len(listed) == 1
    return str(listed[0]["id"])


def wrappers_of(directory: Path) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes()
            except OSError:
                continue
            if b"local_wrapper.py" in cmdline and str(directory).encode() in cmdline:
                found.append(int(entry.name))
    return found


def test_a_stalled_wrapper_never_makes_the_command_run_twice(tmp_path: Path) -> None:
    """Issue: a wrapper stopped before its claim let the launch grace expire, attempt 2 ran,
    and the resumed wrapper ran attempt 1 too. Now the stalled attempt is fenced first."""
    counter = tmp_path / "counter"
    script = f"echo ran >> {counter}; echo out"
    env = {"VIBESYS_STALL": "first_wrapper_before_claim"}
    started = subprocess.Popen(
        [sys.executable, "-m", "vibesys", "run", "--", "sh", "-c", script],
        cwd=tmp_path,
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not wrappers_of(tmp_path):
        assert time.monotonic() < deadline and started.poll() is None, "no wrapper started"
        time.sleep(0.02)
    stalled = wrappers_of(tmp_path)
    out, err = started.communicate(timeout=90)
    assert started.returncode == 0, err
    assert out == "out\n"
    for pid in stalled:  # wake the first wrapper, if the fence did not end it already
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    time.sleep(0.5)
    assert counter.read_text() == "ran\n", "the command must run exactly once"
    inv = show(tmp_path, only_id(tmp_path))
    attempts = inv["attempts"]
    assert isinstance(attempts, list) and len(attempts) == 2
    assert "kind=fence" in str(attempts[0]["claim"])
    events = [h["event"] for h in inv["history"]]  # type: ignore[attr-defined]
    assert "FenceIntended" in events and events.index("FenceIntended") < events.index("Submitted")


def test_an_attempt_submitted_by_reconcile_runs_in_the_recorded_context(tmp_path: Path) -> None:
    """Issue: an attempt submitted by `reconcile` ran in the reconciling process's directory
    with its environment."""
    home = tmp_path / "project"
    home.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    journal = tmp_path / "journal.db"
    crashed = cli(
        "run",
        "--journal",
        str(journal),
        "--",
        "sh",
        "-c",
        'pwd > where; echo "$ONLY_AT_RUN" >> where',
        cwd=home,
        env={"VIBESYS_FAILPOINTS": "after_submit_intent", "ONLY_AT_RUN": "recorded"},
    )
    assert crashed.returncode == 137
    reconciled = cli(
        "reconcile", "--journal", str(journal), cwd=elsewhere, env={"ONLY_AT_RUN": "wrong"}
    )
    assert reconciled.returncode == 0, reconciled.stderr
    listed = json.loads(
        cli("journal", "list", "--json", "--journal", str(journal), cwd=home).stdout
    )["invocations"]
    waited = cli("wait", str(listed[0]["id"]), "--journal", str(journal), cwd=elsewhere)
    assert waited.returncode == 0, waited.stderr
    assert (home / "where").read_text() == f"{home}\nrecorded\n"
    assert not (elsewhere / "where").exists()
    env_file = (
        Path(str(show(home, str(listed[0]["id"]), journal)["invocation_dir"])) / "context.env.json"
    )
    assert env_file.stat().st_mode & 0o777 == 0o600, "the environment is the owner's only"
    shown = cli("journal", "show", str(listed[0]["id"]), "--journal", str(journal), cwd=home)
    assert "recorded" not in shown.stdout, "no environment value in the journal"


def test_cancel_after_the_wrapper_was_killed_stops_the_command(tmp_path: Path) -> None:
    """Issue: cancel reported CANCELLED while the command ran on, its supervisor SIGKILLed."""
    beacon = tmp_path / "beacon"
    inv_id = cli(
        "run",
        "--detach",
        "--",
        "sh",
        "-c",
        f"trap '' TERM; while :; do date +%s%N > {beacon}; sleep 0.1; done",
        cwd=tmp_path,
    ).stdout.strip()
    inv = show(tmp_path, inv_id)
    attempt_dir = Path(str(inv["invocation_dir"])) / "1"
    claim = (attempt_dir / "claim").read_text()
    wrapper = int(next(line for line in claim.splitlines() if line.startswith("pid="))[4:])
    os.kill(wrapper, signal.SIGKILL)
    cancelled = cli("cancel", inv_id, cwd=tmp_path, timeout=90)
    assert cancelled.returncode == 0, cancelled.stderr
    assert "CANCELLED" in cancelled.stderr
    group = json.loads((attempt_dir / "group").read_text())["pgid"]
    time.sleep(0.3)
    before = beacon.read_text()
    time.sleep(0.5)
    assert beacon.read_text() == before, "nothing of the command runs any more"
    from vibesys.osutil.proc import group_members

    assert group_members(int(group)) == []


def test_following_is_not_owning(tmp_path: Path) -> None:
    """Issue: Ctrl-C on `logs --follow` cancelled the job; it printed nothing for a job another
    process drives, and nothing for a finished one."""
    gate = tmp_path / "gate"
    driver = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vibesys",
            "run",
            "--",
            "sh",
            "-c",
            f"echo first; while [ ! -e {gate} ]; do sleep 0.05; done; echo second",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while (
        not (tmp_path / ".vibesys" / "journal.db").exists()
        or not json.loads(cli("journal", "list", "--json", cwd=tmp_path).stdout or '{"count": 0}')[
            "count"
        ]
    ):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    inv_id = only_id(tmp_path)
    follower = subprocess.Popen(
        [sys.executable, "-m", "vibesys", "logs", "--follow", inv_id],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert follower.stdout is not None
    assert follower.stdout.readline() == "first\n", "it streams a job another process drives"
    follower.send_signal(signal.SIGINT)
    _, err = follower.communicate(timeout=30)
    assert "Traceback" not in err
    assert show(tmp_path, inv_id)["cancel_requested"] is False, "following is not owning"
    gate.touch()
    assert driver.wait(timeout=60) == 0
    finished = cli("logs", "--follow", inv_id, cwd=tmp_path, timeout=30)
    assert finished.returncode == 0 and finished.stdout == "first\nsecond\n"
