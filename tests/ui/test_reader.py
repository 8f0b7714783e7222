"""The view only reads: a session of browsing every page, API and stream leaves the journal and
its `-wal` and `-shm` byte for byte as they were, whether a writer has the journal open (in
another process, as `vibesys run` would), one was killed with it open, or every writer closed
(no WAL files: none are made). And it sees what writers committed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from tests.ui.journal_data import Ids, build
from vibesys.errors import NotAJournal, UsageError
from vibesys.journal_schema import open_journal
from vibesys.ui.app import create_app
from vibesys.ui.reader import JournalReader, journal_files

TOKEN = "read-only"
#: Commits one more invocation, then keeps the journal open until stdin closes (or, with
#: `die`, leaves at once without closing it, as a killed writer would).
WRITER = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from vibesys.journal_schema import open_journal
    journal = open_journal(Path(sys.argv[1]))
    journal.create_invocation(invocation_id="1b00000000000001", adapter="local",
        command=["true"], request={}, label="written meanwhile", max_retries=0, invocation_dir="/r")
    print("ready", flush=True)
    if sys.argv[2] == "die":
        os._exit(0)
    sys.stdin.read()
    journal.close()
    """
)


def browse(path: Path, ids: Ids) -> list[str]:
    """Every endpoint once; the ids the list showed."""
    with TestClient(create_app(JournalReader(path), TOKEN)) as client:

        def get(url: str, **params: str) -> str:
            answer = client.get(url, params={"token": TOKEN, **params})
            assert answer.status_code == 200, (url, answer.text)
            return answer.text

        for invocation in (ids.done, ids.retried, ids.sky, ids.prepared, ids.broker):
            get(f"/inv/{invocation}")
            get(f"/api/invocations/{invocation}")
            get(f"/api/invocations/{invocation}/details")
        get(f"/inv/{ids.done}/logs/stdout")
        get(f"/api/invocations/{ids.done}/logs/stderr", offset="2")
        get(f"/events/inv/{ids.done}", attempt="1")
        for url in ("/clusters", "/api/clusters", "/api/broker", "/api/states", "/", "/"):
            get(url)
        get("/", state="RUNNING", label="bench")
        listed = client.get("/api/invocations", params={"token": TOKEN}).json()
        return [i["id"] for i in listed["invocations"]]


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, Ids]:
    path = tmp_path / "journal.db"
    return path, build(path)


@pytest.fixture
def writer(built: tuple[Path, Ids]) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(built[0]), "stay"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    yield process
    process.communicate(timeout=30)


def test_browsing_beside_a_live_writer_changes_no_byte(
    built: tuple[Path, Ids], writer: subprocess.Popen[str]
) -> None:
    path, ids = built
    before = journal_files(path)
    assert before["journal.db-wal"] and before["journal.db-shm"]  # the writer's, with frames
    listed = browse(path, ids)
    assert journal_files(path) == before
    assert "1b00000000000001" in listed  # committed to the WAL only, and seen


def test_browsing_after_a_killed_writer_changes_no_byte(built: tuple[Path, Ids]) -> None:
    path, ids = built
    died = subprocess.run(
        [sys.executable, "-c", WRITER, str(path), "die"], capture_output=True, text=True
    )
    assert died.stdout == "ready\n"
    before = journal_files(path)
    assert before["journal.db-wal"]  # left behind, not checkpointed
    assert "1b00000000000001" in browse(path, ids)
    assert journal_files(path) == before


def test_browsing_a_quiet_journal_makes_no_wal_files(built: tuple[Path, Ids]) -> None:
    path, ids = built
    before = journal_files(path)
    assert before["journal.db-wal"] is None and before["journal.db-shm"] is None
    assert len(browse(path, ids)) == 5
    assert journal_files(path) == before


def test_a_read_during_which_the_file_changed_is_done_again(built: tuple[Path, Ids]) -> None:
    import os

    path, _ = built
    reader = JournalReader(path)
    calls: list[int] = []

    def body(journal: object) -> int:
        calls.append(1)
        if len(calls) == 1:  # as a checkpoint would: the file is written under the read
            os.utime(path, ns=(1, 1))
        return len(calls)

    assert reader.read(body) == 2


def test_what_is_not_a_journal_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no journal at"):
        JournalReader(tmp_path / "missing.db").check()
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(NotAJournal, match="is not a vibesys journal"):
        JournalReader(text).check()
    empty = tmp_path / "empty.db"
    open_journal(empty).close()
    JournalReader(empty).check()
