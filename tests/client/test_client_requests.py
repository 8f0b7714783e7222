"""`Client.submit_request` (a request recorded under its caller's own ids, as the bridge's)
and the caller-driven handle: the row first, the invocation recorded once whatever the same
ids are sent again with, the caller's check refusing a row before anything more is written;
`Handle.drive` and `Handle.follow` in the caller's thread, on the caller's connection."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from vibesys.adapters.local_request import LocalRequest
from vibesys.client import Client, Recording, RequestRow
from vibesys.engine import DriveOptions
from vibesys.job_result import JobStatus, NotEnded
from vibesys.journal_schema import open_journal
from vibesys.journal_schema.recorded_evaluations import RecordedEvaluation


def request_row(tmp_path: Path, body: dict[str, object]) -> RequestRow:
    return RequestRow(
        run_id="campaign-1",
        request_id="req-1",
        uid=os.getuid(),
        workspace=str(tmp_path),
        kind="evaluate",
        body=body,
        results_dir=str(tmp_path / "results"),
    )


def recording_in(tmp_path: Path, calls: list[str]) -> Recording:
    calls.append("recorded")
    return Recording(
        argv=[sys.executable, "-c", "print('ran')"],
        adapter="local",
        request=LocalRequest(),
        label="a request of its own",
        cwd=str(tmp_path),
        env={"PATH": os.environ["PATH"]},
        campaign="campaign-1",
    )


def test_the_same_ids_are_one_invocation_and_the_check_sees_the_first_row(tmp_path: Path) -> None:
    calls: list[str] = []
    seen: list[RecordedEvaluation] = []
    with Client(tmp_path / "journal.db") as client:
        first, row, created = client.submit_request(
            request_row(tmp_path, {"argv": "first"}),
            lambda _row: recording_in(tmp_path, calls),
            seen.append,
        )
        again, same_row, created_again = client.submit_request(
            request_row(tmp_path, {"argv": "second"}),
            lambda _row: recording_in(tmp_path, calls),
            seen.append,
        )
        assert (created, created_again, calls) == (True, False, ["recorded"])
        assert again.id == first.id == row.invocation_id == same_row.invocation_id
        assert [found.body for found in seen] == [{"argv": "first"}, {"argv": "first"}]

        def refuse(_row: RecordedEvaluation) -> None:
            raise ValueError("another body")

        with pytest.raises(ValueError, match="another body"):
            client.submit_request(
                request_row(tmp_path, {}), lambda _row: recording_in(tmp_path, calls), refuse
            )
        with pytest.raises(NotEnded):
            first.result()  # the caller drives it: nothing has yet
        ended = first.follow(DriveOptions(owner=False))
        assert ended.state == "DONE"
        found = first.result()
        assert (found.status, found.results_dir) == (
            JobStatus.COMPLETED,
            str(tmp_path / "results" / first.id),
        )
        assert b"".join(first.logs()) == b"ran\n"
    journal = open_journal(tmp_path / "journal.db", readonly=True)
    try:
        inv = journal.invocations.get(first.id)
        assert (inv.label, len(journal.invocations.all_ids())) == ("a request of its own", 1)
    finally:
        journal.close()


def test_a_submission_is_driven_in_the_callers_thread_on_its_connection(tmp_path: Path) -> None:
    journal = open_journal(tmp_path / "journal.db")
    try:
        client = Client(journal)
        handle = client.submit([sys.executable, "-c", "print('here')"], drive=False)
        ended = handle.drive(DriveOptions())
        assert (ended.state, ended.outcome, handle.result().status) == (
            "DONE",
            "COMPLETED",
            JobStatus.COMPLETED,
        )
        client.close()
        assert journal.invocations.get(handle.id).state == "DONE"  # the caller's, still open
    finally:
        journal.close()
