"""An invocation's event stream while it runs: new output by byte offset (a character split
across writes arrives whole), a retry (the stream moves to the new attempt's output), the end
(the last output, then `end`)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio

from tests.ui.journal_data import T0, build
from vibesys.journal_schema import open_journal
from vibesys.states import (
    Collected,
    FailureClass,
    Finished,
    InfraFailed,
    Outcome,
    SubmitDispatched,
    SubmitIntended,
    Submitted,
)
from vibesys.ui.app import Ui
from vibesys.ui.events import invocation_events, list_events
from vibesys.ui.queries import ListFilter
from vibesys.ui.reader import JournalReader

ID = "1d00000000000001"


def parse(raw: bytes) -> tuple[str, Any]:
    fields = dict(line.split(": ", 1) for line in raw.decode().strip().splitlines())
    return fields["event"], json.loads(fields["data"])


async def until(stream: AsyncIterator[bytes], kind: str) -> list[tuple[str, Any]]:
    """Events up to and including the first of `kind`."""
    seen: list[tuple[str, Any]] = []
    with anyio.fail_after(10):
        async for raw in stream:
            if raw.startswith(b":"):
                continue
            seen.append(parse(raw))
            if seen[-1][0] == kind:
                return seen
    raise AssertionError(f"the stream ended before {kind}: {seen}")


def test_the_stream_follows_output_retries_and_the_end(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    build(path)
    journal = open_journal(path)
    invocation_dir = tmp_path / "runs" / ID
    inv = journal.create_invocation(
        invocation_id=ID, adapter="local", command=["x"], request={}, label="live",
        max_retries=1, invocation_dir=str(invocation_dir), now=T0,
    )  # fmt: skip
    for event in (SubmitIntended(1, "n-1"), SubmitDispatched(1, "n-1"), Submitted("1", "ok")):
        inv, _ = journal.commit_transition(inv, event)
    (invocation_dir / "1").mkdir(parents=True)
    out1 = invocation_dir / "1" / "stdout"
    out1.write_bytes(b"one " + "é".encode()[:1])
    live = Ui(JournalReader(path), "token", lambda: T0)

    async def scenario() -> list[list[tuple[str, Any]]]:
        nonlocal inv
        stream = invocation_events(live, ID, 1, {"stdout": 0, "stderr": 0})
        steps = [await until(stream, "log")]
        with out1.open("ab") as handle:
            handle.write("é".encode()[1:] + b" two\n")
        steps.append(await until(stream, "log"))
        for event in (
            InfraFailed(FailureClass.NODE_FAILED, "node down"),
            SubmitIntended(2, "n-2"),
            SubmitDispatched(2, "n-2"),
            Submitted("2", "ok"),
        ):
            inv, _ = journal.commit_transition(inv, event)
        steps.append(await until(stream, "reset"))
        (invocation_dir / "2").mkdir()
        (invocation_dir / "2" / "stdout").write_bytes(b"second attempt\n")
        steps.append(await until(stream, "log"))
        (invocation_dir / "2" / "stderr").write_bytes(b"bye\n")
        for event in (
            Finished(FailureClass.COMPLETED, 0, "exit 0"),
            Collected(Outcome.COMPLETED, 0, "logs"),
        ):
            inv, _ = journal.commit_transition(inv, event)
        steps.append(await until(stream, "end"))
        return steps

    try:
        first, second, retry, attempt2, end = anyio.run(scenario)
    finally:
        journal.close()
    assert [kind for kind, _ in first] == ["html", "log"]
    assert "RUNNING" in first[0][1]["inv-top"]
    assert first[1][1] | {"size": 0} == {
        "stream": "stdout", "start": 0, "end": 4, "size": 0, "text": "one ", "attempt": 1,
        "skipped": 0,
    }  # fmt: skip
    assert second == [("log", second[0][1])] and second[0][1]["text"] == "é two\n"
    assert second[0][1]["start"] == 4
    assert retry[-1] == ("reset", {"attempt": 2}) and retry[0][0] == "html"
    assert attempt2[-1][1]["attempt"] == 2 and attempt2[-1][1]["text"] == "second attempt\n"
    assert end[-1] == ("end", {"state": "DONE"})
    assert any(kind == "html" and "DONE" in part["inv-top"] for kind, part in end)
    assert ("stderr", "bye\n") in [(c["stream"], c["text"]) for k, c in end if k == "log"]


class CountingUi(Ui):
    reads = 0

    def list_parts(self, flt: ListFilter) -> dict[str, str]:
        self.reads += 1
        return super().list_parts(flt)


def test_a_list_stream_reads_the_list_only_when_what_it_shows_may_change(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    ids = build(path)
    live = CountingUi(JournalReader(path), "token", lambda: T0)
    journal = open_journal(path)
    got: list[bytes] = []

    async def until_sent(count: int) -> None:
        with anyio.fail_after(10):
            while len(got) < count:
                await anyio.sleep(0.05)

    async def scenario() -> tuple[int, int]:
        async def consume() -> None:
            async for raw in list_events(live, ListFilter(adapter="local")):
                if not raw.startswith(b":"):
                    got.append(raw)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(consume)
            await until_sent(1)
            for _ in range(4):  # a driver renewing its lease: the journal changes, the list not
                journal.leases.acquire_lease(ids.prepared, "elsewhere:1:2", timedelta(seconds=30))
                await anyio.sleep(0.4)
            quiet = live.reads, len(got)
            inv = journal.invocations.get(ids.prepared)
            journal.commit_transition(inv, SubmitIntended(1, "n-1"))
            await until_sent(2)
            tasks.cancel_scope.cancel()
        return quiet

    try:
        reads, sent = anyio.run(scenario)
    finally:
        journal.close()
    assert (reads, sent) == (1, 1)
    assert live.reads == 2 and b"SUBMITTING" in got[1]
