"""`vibesys.Client` on the local adapter, with real processes: submit returns at once and
result() is the journal's JobResult (COMPLETED, APPLICATION_FAILED, CANCELLED, TIMEOUT); logs()
are the job's bytes unchanged; many handles of one process all finish; bad input records
nothing; attach from another client finds the same invocation."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.hang_guard import wait_until
from vibesys import AsyncClient, Client, KeyConflict
from vibesys.errors import UsageError
from vibesys.invocation import submission
from vibesys.job_result import JobStatus
from vibesys.journal_schema import open_journal

PY = sys.executable
#: Every byte value, twice, and no newline at the end: nothing of it is text.
PAYLOAD = bytes(range(256)) * 2 + b"\xff\xfe tail without newline"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    with Client(tmp_path / "journal.db") as opened:
        yield opened


def test_submit_returns_a_handle_whose_result_is_the_exit_code(client: Client) -> None:
    good = client.submit([PY, "-c", "print('ok')"], label="good")
    bad = client.submit([PY, "-c", "raise SystemExit(3)"])
    found = good.result(60)
    assert (found.status, found.exit_code, found.invocation_id) == (
        JobStatus.COMPLETED,
        0,
        good.id,
    )
    failed = bad.result(60)
    assert (failed.status, failed.exit_code) == (JobStatus.APPLICATION_FAILED, 3)
    status = bad.status()
    assert (status.state, status.outcome, status.exit_code, status.ended) == (
        "DONE",
        "APPLICATION_FAILED",
        3,
        True,
    )


def test_logs_are_the_jobs_bytes_unchanged(client: Client) -> None:
    write = f"import sys; sys.stdout.buffer.write({PAYLOAD!r}); sys.stderr.buffer.write(b'\\x80e')"
    handle = client.submit([PY, "-c", write])
    followed = b"".join(handle.logs(follow=True))
    assert followed == PAYLOAD
    assert b"".join(handle.logs()) == PAYLOAD
    assert b"".join(handle.logs(stream="stderr")) == b"\x80e"
    assert handle.result(60).status is JobStatus.COMPLETED
    # A reader resumes at its byte offset (past every byte, it gets nothing).
    for offset in (1, 255, len(PAYLOAD) - 1, len(PAYLOAD), len(PAYLOAD) + 9):
        assert b"".join(handle.logs(offset=offset)) == PAYLOAD[offset:]
    assert b"".join(handle.logs(stream="stderr", offset=1)) == b"e"
    with pytest.raises(ValueError, match="offset -1"):
        next(handle.logs(offset=-1))


def test_logs_of_one_attempt_from_its_offset_in_pieces(client: Client) -> None:
    """What the bridge's follower reads: one attempt's file from an offset of its own, in
    pieces of at most `chunk` bytes."""
    handle = client.submit([PY, "-c", f"import sys; sys.stdout.buffer.write({PAYLOAD!r})"])
    assert handle.result(60).status is JobStatus.COMPLETED
    pieces = list(handle.logs(attempt=1, offset=100, chunk=64))
    assert max(map(len, pieces)) == 64
    assert b"".join(pieces) == PAYLOAD[100:]
    assert list(handle.logs(attempt=1, offset=len(PAYLOAD))) == []
    assert list(handle.logs(attempt=2)) == []  # none made: nothing, not an error


def test_following_logs_sees_bytes_written_in_pieces(client: Client) -> None:
    pieces = "import sys,time\nfor i in range(5):\n sys.stdout.buffer.write(bytes([i, 0xff]))\n"
    pieces += " sys.stdout.flush(); time.sleep(0.1)\n"
    handle = client.submit([PY, "-c", pieces])
    assert b"".join(handle.logs(follow=True)) == b"".join(bytes([i, 0xFF]) for i in range(5))


def test_cancel_ends_a_running_job_cancelled(client: Client) -> None:
    handle = client.submit([PY, "-c", "import time; time.sleep(60)"])
    wait_until(lambda: handle.status().state == "RUNNING", 30, "the job running")
    handle.cancel()
    found = handle.result(60)
    assert found.status is JobStatus.CANCELLED
    assert found.reason == "cancelled by vibesys.Client cancel"


def test_a_timeout_cancels_the_job_as_timeout(client: Client) -> None:
    handle = client.submit([PY, "-c", "import time; time.sleep(60)"], timeout=1)
    assert handle.result(60).status is JobStatus.TIMEOUT


def test_many_handles_of_one_process_all_finish(client: Client) -> None:
    handles = [
        client.submit([PY, "-c", f"import time; time.sleep(0.3); raise SystemExit({n})"])
        for n in range(8)
    ]
    assert len({h.id for h in handles}) == 8
    assert [h.result(120).exit_code for h in handles] == list(range(8))


def test_bad_input_records_nothing(client: Client) -> None:
    with pytest.raises(UsageError, match="gpus= is not an option of the local adapter"):
        client.submit([PY, "-c", "pass"], gpus=1)
    with pytest.raises(UsageError, match="unknown adapter"):
        client.submit([PY, "-c", "pass"], adapter="nowhere")
    with pytest.raises(UsageError, match="retries"):
        client.submit([PY, "-c", "pass"], retries=-1)
    with pytest.raises(UsageError, match=r"retries=1\.5: must be a whole number"):
        client.submit([PY, "-c", "pass"], retries=1.5)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="no command"):
        client.submit([])
    journal = open_journal(client.journal_path, readonly=True)
    try:
        assert journal.invocations.list_invocations() == []
        assert journal.conn.execute("SELECT count(*) FROM bridge_requests").fetchone() == (0,)
    finally:
        journal.close()


def test_the_same_key_is_one_invocation_and_another_command_is_refused(client: Client) -> None:
    first = client.submit([PY, "-c", "print(1)"], key="eval-7")
    again = client.submit([PY, "-c", "print(1)"], key="eval-7")
    assert again is first
    with pytest.raises(KeyConflict, match="'eval-7' was submitted before with another argv"):
        client.submit([PY, "-c", "print(2)"], key="eval-7")
    with pytest.raises(KeyConflict, match="another retries"):
        client.submit([PY, "-c", "print(1)"], key="eval-7", retries=0)
    assert first.result(60).status is JobStatus.COMPLETED


def test_a_key_submitted_before_is_found_before_its_request_is_built_again(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retry after what its request checks has gone (a candidate directory removed) is
    the same invocation: nothing is built again for a key that names one."""
    first = client.submit([PY, "-c", "print(1)"], key="built-once")
    assert first.result(60).status is JobStatus.COMPLETED

    def gone(*_args: object) -> None:
        raise UsageError("candidate /gone is not a directory")

    monkeypatch.setattr(submission, "_request", gone)
    assert client.submit([PY, "-c", "print(1)"], key="built-once") is first
    with Client(tmp_path / "journal.db") as other:
        assert other.submit([PY, "-c", "print(1)"], key="built-once").id == first.id
    with pytest.raises(KeyConflict, match="another argv"):
        client.submit([PY, "-c", "print(2)"], key="built-once")
    with pytest.raises(UsageError, match="candidate /gone"):
        client.submit([PY, "-c", "print(1)"], key="a-new-key")


def test_the_same_key_with_another_value_of_a_variable_is_refused(client: Client) -> None:
    command = [PY, "-c", "import os; print(os.environ['LEVEL'])"]
    handle = client.submit(command, key="k", env={"LEVEL": "1"})
    assert b"".join(handle.logs(follow=True)) == b"1\n"
    with pytest.raises(KeyConflict, match="another value of LEVEL"):
        client.submit(command, key="k", env={"LEVEL": "2"})


def test_another_client_attaches_by_key_or_id(tmp_path: Path) -> None:
    with Client(tmp_path / "journal.db") as first:
        handle = first.submit([PY, "-c", "raise SystemExit(5)"], key="attach-me")
        assert handle.result(60).exit_code == 5
    with Client(tmp_path / "journal.db") as second:
        by_key, by_id = second.attach("attach-me"), second.attach(handle.id[:12])
        assert by_key is by_id and by_key.id == handle.id
        assert by_key.result(60).exit_code == 5
        with pytest.raises(UsageError):
            second.attach("no-such-key-or-id")


def test_a_closed_client_refuses_and_its_unfinished_job_is_attached_later(tmp_path: Path) -> None:
    marker = tmp_path / "go"
    wait = f"import os,time\nwhile not os.path.exists({str(marker)!r}): time.sleep(0.05)"
    with Client(tmp_path / "journal.db") as first:
        handle = first.submit([PY, "-c", wait], key="later")
        wait_until(lambda: handle.status().state == "RUNNING", 30, "the job running")
    with pytest.raises(UsageError, match="closed"):
        first.submit([PY, "-c", "pass"])
    marker.touch()  # the job ran on without a driver
    with Client(tmp_path / "journal.db") as second:
        found = second.attach("later").result(60)
    assert (found.status, found.attempt) == (JobStatus.COMPLETED, 1)


def test_the_async_client(tmp_path: Path) -> None:
    async def main() -> tuple[int | None, int | None]:
        async with AsyncClient(tmp_path / "journal.db") as client:
            handles = [await client.submit([PY, "-c", f"raise SystemExit({n})"]) for n in (1, 2)]
            found = await asyncio.gather(*(client.result(h, 60) for h in handles))
            return found[0].exit_code, found[1].exit_code

    assert asyncio.run(main()) == (1, 2)


def test_two_clients_of_one_process_share_one_driver(tmp_path: Path) -> None:
    first, second = Client(tmp_path / "journal.db"), Client(tmp_path / "journal.db")
    try:
        marker = tmp_path / "go"
        wait = f"import os,time\nwhile not os.path.exists({str(marker)!r}): time.sleep(0.05)"
        handle = first.submit([PY, "-c", wait], key="shared")
        assert second.attach("shared") is handle
        first.close()  # the second client still follows it: its driver goes on
        marker.touch()
        assert handle.result(60).status is JobStatus.COMPLETED
        handle.cancel()  # too late: an ended invocation keeps its outcome
        assert handle.status().outcome == "COMPLETED"
    finally:
        first.close()
        second.close()


def test_a_timeout_counts_from_the_recording_for_whoever_attaches(tmp_path: Path) -> None:
    with Client(tmp_path / "journal.db") as first:
        first.submit([PY, "-c", "import time; time.sleep(60)"], key="slow", timeout=1.5)
    with Client(tmp_path / "journal.db") as second:
        found = second.attach("slow").result(60)
    assert found.status is JobStatus.TIMEOUT
    assert found.reason == "cancelled by timeout: 1.5 s"
