"""Following is not owning, through the real `vibesys` command: a `wait` in the background
(no terminal) stopped by a signal cancels nothing; the job runs on and a later `wait` exits
with its status."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import vibesys_cli as cli
from tests.helpers.hang_guard import wait_until


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP])
def test_a_waiter_in_the_background_stops_and_never_cancels(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """Issue: `vibesys wait` cancelled the job on SIGINT/SIGTERM/SIGHUP; an agent waiting in
    the background whose shell ended lost its job. Now the waiter (no terminal, driving the
    job: nobody else does) only stops; the job ends on its own and a second wait reports it."""
    go = tmp_path / "go"
    job = f"for i in $(seq 600); do [ -e {go} ] && break; sleep 0.05; done; echo ran; exit 3"
    inv = cli("run", "--detach", "--", "sh", "-c", job, cwd=tmp_path).stdout.strip()
    with subprocess.Popen(
        [sys.executable, "-m", "vibesys", "wait", inv],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # no controlling terminal, as a job an agent backgrounds
    ) as waiter:
        # The waiter drives the job: nobody else.
        wait_until(lambda: _lease_owner(tmp_path, inv), 20, "the waiter to take the job over")
        waiter.send_signal(signum)
        _, stderr = waiter.communicate(timeout=20)
    assert waiter.returncode == 128 + signum, stderr
    assert "nothing was cancelled" in stderr and "Traceback" not in stderr
    shown = json.loads(cli("journal", "show", inv, "--json", cwd=tmp_path).stdout)
    assert shown["state"] == "RUNNING" and not shown["cancel_requested"]
    go.touch()
    again = cli("wait", inv, cwd=tmp_path)
    assert again.returncode == 3, again.stderr
    assert cli("logs", inv, cwd=tmp_path).stdout == "ran\n"


def _lease_owner(cwd: Path, invocation: str) -> str | None:
    conn = sqlite3.connect(cwd / ".vibesys" / "journal.db")
    try:
        row = conn.execute("SELECT lease_owner FROM invocations WHERE id=?", (invocation,))
        found = row.fetchone()
    finally:
        conn.close()
    return found[0] if found else None
