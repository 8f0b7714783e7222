"""The CLI on the Client: `vibesys run` records as `Client.submit` does, so a Python client
attaches to what the CLI ran; `vibesys wait`, `logs --follow` and `result` find their
invocation as `Client.attach` does, so an idempotency key names it too; a handle its caller drives
(`drive=False`, leased to its process as `run`'s invocation is) answers from the journal."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import vibesys_cli
from tests.helpers.hang_guard import wait_until
from vibesys import Client
from vibesys.job_result import JobStatus, NotEnded

PY = sys.executable


def test_a_python_client_attaches_to_what_vibesys_run_ran(tmp_path: Path) -> None:
    journal = tmp_path / "journal.db"
    ran = vibesys_cli(
        "run", "--json", "--journal", str(journal), "--name", "cli", "--", PY, "-c",
        "raise SystemExit(4)",
        cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 4, ran.stderr
    invocation = json.loads(ran.stdout)["id"]
    with Client(journal) as client:
        found = client.attach(invocation).result(60)
    assert (found.status, found.exit_code, found.invocation_id) == (
        JobStatus.APPLICATION_FAILED,
        4,
        invocation,
    )


def test_wait_logs_follow_and_result_take_a_clients_key(tmp_path: Path) -> None:
    journal = tmp_path / "journal.db"
    marker = tmp_path / "go"
    script = (
        f"import os,time\nwhile not os.path.exists({str(marker)!r}): time.sleep(0.05)\n"
        "print('waited for')"
    )
    with Client(journal) as client:
        handle = client.submit([PY, "-c", script], key="from-python")
        wait_until(lambda: handle.status().state == "RUNNING", 30, "the job running")
    marker.touch()  # the client has closed: `wait` drives it on
    waited = vibesys_cli("wait", "--journal", str(journal), "from-python", cwd=tmp_path)
    assert waited.returncode == 0, waited.stderr
    assert waited.stdout == "waited for\n"
    assert f"vibesys: {handle.id} DONE COMPLETED exit 0" in waited.stderr
    followed = vibesys_cli("logs", "-f", "--journal", str(journal), "from-python", cwd=tmp_path)
    assert (followed.returncode, followed.stdout) == (0, "waited for\n")
    shown = vibesys_cli("result", "--json", "--journal", str(journal), "from-python", cwd=tmp_path)
    assert json.loads(shown.stdout)["invocation_id"] == handle.id, shown.stderr


def test_a_handle_its_caller_drives_answers_from_the_journal(tmp_path: Path) -> None:
    journal = tmp_path / "journal.db"
    with Client(journal) as client:
        handle = client.submit([PY, "-c", "print('by the caller')"], drive=False)
        assert handle.done()
        with pytest.raises(NotEnded):
            handle.result()  # recorded, and nobody drives it yet
        assert handle.status().state == "PREPARED"  # leased to this process: it drives
        assert client.attach(handle.id).result(60).status is JobStatus.COMPLETED
    assert handle.result().status is JobStatus.COMPLETED
    assert b"".join(handle.logs(follow=True)) == b"by the caller\n"


def test_wait_on_a_timed_out_invocation_says_timeout_as_its_result_does(tmp_path: Path) -> None:
    """A timeout's cancel is recorded as a cancel; what `wait` tells (its end line, exit 124
    as timeout(1)'s) is the TIMEOUT the JobResult gives, not an interrupt's 130."""
    journal = tmp_path / "journal.db"
    with Client(journal) as client:
        handle = client.submit([PY, "-c", "import time; time.sleep(60)"], timeout=1)
        assert handle.result(60).status is JobStatus.TIMEOUT
    waited = vibesys_cli("wait", "--journal", str(journal), handle.id, cwd=tmp_path)
    assert waited.returncode == 124, waited.stderr
    assert f"vibesys: {handle.id} DONE TIMEOUT" in waited.stderr
    assert "its timeout cancelled it" in waited.stderr


def test_a_clients_timeout_is_kept_by_whoever_drives_next(tmp_path: Path) -> None:
    """The timeout is recorded with the submission: the client gone (its job runs on), a
    `vibesys wait` that drives it next cancels it at the deadline, as the client would have."""
    journal = tmp_path / "journal.db"
    with Client(journal) as client:
        handle = client.submit([PY, "-c", "import time; time.sleep(60)"], timeout=2)
        wait_until(lambda: handle.status().state == "RUNNING", 30, "the job running")
    assert not handle.status().ended  # the client closed: nothing cancelled it
    waited = vibesys_cli("wait", "--journal", str(journal), handle.id, cwd=tmp_path, timeout=30)
    assert (waited.returncode, "DONE TIMEOUT" in waited.stderr) == (124, True), waited.stderr
    with Client(journal) as client:
        assert client.attach(handle.id).result(10).status is JobStatus.TIMEOUT
