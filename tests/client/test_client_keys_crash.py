"""An idempotency key is one invocation and one job, whatever dies when: a submitter killed
between its key's row and its invocation (the failpoint), one SIGKILLed right after submit
returned, one killed after PREPARED; two submitters of the same key at the same time. Real
processes; the job counts its own runs in a file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import vibesys_cli
from tests.helpers.paths import ROOT
from vibesys import Client
from vibesys.job_result import JobStatus
from vibesys.journal_schema import open_journal

pytestmark = pytest.mark.crash
KEY = "eval-42"


def submitter(
    tmp_path: Path, mode: str, *, failpoint: str | None = None, go: Path | None = None
) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIBESYS_JOURNAL",)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("VIBESYS_FAILPOINTS", None)
    if failpoint is not None:
        env["VIBESYS_FAILPOINTS"] = failpoint
    args = [str(tmp_path / "journal.db"), KEY, str(tmp_path / "count"), mode]
    args += [str(go)] if go is not None else []
    return subprocess.Popen(
        [sys.executable, "-m", "tests.client.submitter", *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=120)
    return process.returncode, out, err


def one_invocation_one_job(tmp_path: Path) -> str:
    journal = open_journal(tmp_path / "journal.db", readonly=True)
    try:
        invocations = journal.invocations.list_invocations()
        assert len(invocations) == 1
        inv = invocations[0]
        assert len(journal.invocations.attempts(inv.id)) == 1
        rows = journal.conn.execute("SELECT invocation_id FROM bridge_requests").fetchall()
        assert rows == [(inv.id,)]
    finally:
        journal.close()
    assert (tmp_path / "count").read_text() == "ran\n"
    return inv.id


def test_result_of_a_key_whose_invocation_was_never_recorded_says_so_and_writes_nothing(
    tmp_path: Path,
) -> None:
    status, _, err = finish(submitter(tmp_path, "result", failpoint="after_key_commit"))
    assert status == 137, err
    journal = tmp_path / "journal.db"
    before = journal.read_bytes()
    shown = vibesys_cli("result", "--journal", str(journal), KEY, cwd=tmp_path)
    assert shown.returncode != 0
    assert shown.stdout == ""
    lines = shown.stderr.splitlines()
    assert len(lines) == 1 and "was never recorded" in lines[0], shown.stderr
    assert "readonly" not in shown.stderr and "Traceback" not in shown.stderr
    opened = open_journal(journal, readonly=True)
    try:
        assert opened.invocations.list_invocations() == []
    finally:
        opened.close()
    assert journal.read_bytes() == before


@pytest.mark.parametrize("point", ["after_key_commit", "after_prepare_commit"])
def test_a_submitter_killed_at_a_failpoint_leaves_the_key_to_the_next(
    tmp_path: Path, point: str
) -> None:
    status, _, err = finish(submitter(tmp_path, "result", failpoint=point))
    assert status == 137, err
    journal = open_journal(tmp_path / "journal.db", readonly=True)
    recorded = len(journal.invocations.list_invocations())
    journal.close()
    assert recorded == (0 if point == "after_key_commit" else 1)
    assert not (tmp_path / "count").exists()  # nothing was submitted
    status, out, err = finish(submitter(tmp_path, "result"))
    assert status == 0, err
    inv_id = one_invocation_one_job(tmp_path)
    assert out.split() == [inv_id, "COMPLETED"]


def test_a_submitter_sigkilled_after_submit_is_followed_not_repeated(tmp_path: Path) -> None:
    first = submitter(tmp_path, "hang")
    assert first.stdout is not None
    first_id = first.stdout.readline().strip()
    first.send_signal(signal.SIGKILL)
    assert finish(first)[0] == -signal.SIGKILL
    status, out, err = finish(submitter(tmp_path, "result"))
    assert status == 0, err
    assert out.split() == [first_id, "COMPLETED"]
    assert one_invocation_one_job(tmp_path) == first_id


def test_two_submitters_of_one_key_at_once_make_one_job(tmp_path: Path) -> None:
    go = tmp_path / "go"
    both = [submitter(tmp_path, "result", go=go) for _ in range(2)]
    go.touch()
    outs = []
    for process in both:
        status, out, err = finish(process)
        assert status == 0, err
        outs.append(out.split())
    inv_id = one_invocation_one_job(tmp_path)
    assert outs == [[inv_id, "COMPLETED"]] * 2


def test_attach_records_a_key_whose_recorder_died_before_its_invocation(tmp_path: Path) -> None:
    status, _, err = finish(submitter(tmp_path, "result", failpoint="after_key_commit"))
    assert status == 137, err
    with Client(tmp_path / "journal.db") as client:
        found = client.attach(KEY).result(60)
    assert found.status is JobStatus.COMPLETED
    assert one_invocation_one_job(tmp_path) == found.invocation_id
