"""The view claims a driver only while one can be: a lease held by a live process, unexpired
(or past expiry, by a process on this host that provably lives). A lease that expired on
another host's holder, or a holder here that exited, is "no process drives it", on the page,
in the JSON API, and in the live stream once the clock passes the expiry (the journal
unchanged)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.testclient import TestClient

from tests.ui.test_events import parse
from vibesys.journal_schema import Journal, open_journal
from vibesys.osutil.proc import hostname, self_identity, start_time
from vibesys.states import SubmitDispatched, SubmitIntended, Submitted
from vibesys.ui import logs
from vibesys.ui.app import Ui, create_app
from vibesys.ui.events import invocation_events
from vibesys.ui.reader import JournalReader

T0 = datetime.fromisoformat("2030-01-01T12:00:00+00:00")
ID = "2d00000000000001"
TOKEN = "tok"
#: A holder on a host that is not this one: only its expiry can tell.
ELSEWHERE = "another-host.example:4242:123456"


def running(path: Path, owner: str | None, ttl: float = 30) -> Journal:
    journal = open_journal(path)
    inv = journal.create_invocation(
        invocation_id=ID, adapter="local", command=["sleep", "30"], request={}, label="held",
        max_retries=0, invocation_dir=str(path.parent / "runs" / ID), now=T0,
    )  # fmt: skip
    for event in (SubmitIntended(1, "n-1"), SubmitDispatched(1, "n-1"), Submitted("1", "ok")):
        inv, _ = journal.commit_transition(inv, event, now=T0)
    if owner is not None:
        assert journal.leases.acquire_lease(ID, owner, timedelta(seconds=ttl), now=T0)
    return journal


@pytest.fixture
def details(tmp_path: Path) -> Iterator[Callable[[str | None, datetime], tuple[Any, str]]]:
    """details(owner, now): the details JSON and the page of an invocation leased by `owner`
    at T0 for 30 s, read at `now`."""
    journals: list[Journal] = []

    def read(owner: str | None, now: datetime) -> tuple[Any, str]:
        path = tmp_path / "journal.db"
        if not journals:
            journals.append(running(path, owner))
        app = create_app(JournalReader(path), TOKEN, clock=lambda: now)
        with TestClient(app) as client:
            found = client.get(f"/api/invocations/{ID}/details", params={"token": TOKEN})
            page = client.get(f"/inv/{ID}", params={"token": TOKEN})
        assert found.status_code == page.status_code == 200
        return found.json(), page.text

    yield read
    for journal in journals:
        journal.close()


def test_an_unexpired_lease_of_another_host_drives_it(details: Any) -> None:
    found, page = details(ELSEWHERE, T0 + timedelta(seconds=29))
    assert found["driver"] == {
        "driven": True,
        "owner": ELSEWHERE,
        "lease_expires_at": "2030-01-01T12:00:30.000000+00:00",
        "owner_alive": None,
        "undriven_since": None,
        "text": f"driven by {ELSEWHERE} (lease until 2030-01-01T12:00:30.000000+00:00)",
    }
    assert 'id="driver" data-driven="yes"' in page
    assert '<span class="live" id="live">live</span>' in page


def test_an_expired_lease_of_another_host_drives_nothing(details: Any) -> None:
    found, page = details(ELSEWHERE, T0 + timedelta(seconds=31))
    driver = found["driver"]
    assert driver["driven"] is False
    assert driver["undriven_since"] == "2030-01-01T12:00:30.000000+00:00"
    assert driver["text"].startswith("no process drives it since 2030-01-01T12:00:30.000000+00:00")
    assert "`vibesys reconcile` or `vibesys wait` carries it on" in driver["text"]
    assert 'id="driver" data-driven="no"' in page
    assert "no process drives it since 2030-01-01T12:00:30.000000+00:00" in page
    assert '<span class="live" id="live">not driven</span>' in page
    assert "lease until" not in page


def test_a_holder_here_that_exited_drives_nothing_before_its_expiry(details: Any) -> None:
    child = subprocess.Popen(["sleep", "30"])
    identity = f"{hostname()}:{child.pid}:{start_time(child.pid)}"
    child.kill()
    child.wait()
    found, page = details(identity, T0 + timedelta(seconds=1))
    assert found["driver"]["driven"] is False
    assert found["driver"]["owner_alive"] is False
    assert found["driver"]["undriven_since"] is None  # when it died, the journal cannot say
    assert f"({identity} has exited)" in found["driver"]["text"]
    assert 'data-driven="no"' in page


def test_a_live_holder_here_keeps_its_lease_past_expiry(details: Any) -> None:
    found, page = details(self_identity(), T0 + timedelta(hours=1))
    assert found["driver"]["driven"] is True
    assert found["driver"]["owner_alive"] is True
    assert "its lease expired at 2030-01-01T12:00:30.000000+00:00; the process lives" in page


def test_no_holder_drives_nothing(details: Any) -> None:
    found, _ = details(None, T0)
    assert found["driver"]["driven"] is False
    assert found["driver"]["text"].startswith("no process drives it; `vibesys reconcile`")


def test_the_stream_flips_when_the_lease_expires_with_the_journal_unchanged(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.db"
    journal = running(path, ELSEWHERE, ttl=30)
    journal.close()
    now = [T0 + timedelta(seconds=29)]
    live = Ui(JournalReader(path), TOKEN, lambda: now[0])
    before = path.stat().st_mtime_ns, Path(f"{path}-wal").exists()

    async def scenario() -> list[str]:
        stream = invocation_events(live, ID, 1, {"stdout": 0, "stderr": 0})
        tops = []
        with anyio.fail_after(10):
            async for raw in stream:
                if raw.startswith(b":"):
                    continue
                kind, data = parse(raw)
                if kind == "html" and "inv-top" in data:
                    tops.append(data["inv-top"])
                    if len(tops) == 1:
                        now[0] = T0 + timedelta(seconds=31)  # only the clock moves
                    if 'data-driven="no"' in tops[-1]:
                        return tops
        raise AssertionError("the stream ended")

    tops = anyio.run(scenario)
    assert 'data-driven="yes"' in tops[0]
    assert "no process drives it since 2030-01-01T12:00:30.000000+00:00" in tops[-1]
    assert (path.stat().st_mtime_ns, Path(f"{path}-wal").exists()) == before


def test_a_page_far_behind_jumps_to_the_tail(tmp_path: Path) -> None:
    path = tmp_path / "stdout"
    path.write_bytes(b"".join(b"line %06d\n" % n for n in range(30_000)))  # 330,000 bytes
    size = path.stat().st_size
    jumped = logs.follow(path, "stdout", 0)
    assert jumped.end == size and jumped.start > size - logs.TAIL_BYTES
    assert jumped.text.startswith("line ") and len(jumped.text) <= logs.TAIL_BYTES
    near = logs.follow(path, "stdout", size - 100)  # less than a tail behind: the next bytes
    assert (near.start, near.end) == (size - 100, size)


def test_a_stream_far_behind_sends_the_tail_not_every_byte(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    running(path, ELSEWHERE).close()
    out = tmp_path / "runs" / ID / "1" / "stdout"
    out.parent.mkdir(parents=True)
    out.write_bytes(b"".join(b"line %06d\n" % n for n in range(30_000)))
    live = Ui(JournalReader(path), TOKEN, lambda: T0)

    async def first_log() -> dict[str, Any]:
        stream = invocation_events(live, ID, 1, {"stdout": 0, "stderr": 0})
        with anyio.fail_after(10):
            async for raw in stream:
                if not raw.startswith(b":") and parse(raw)[0] == "log":
                    return dict(parse(raw)[1])
        raise AssertionError("no output sent")

    chunk = anyio.run(first_log)
    size = out.stat().st_size
    assert chunk["end"] == size and chunk["skipped"] == chunk["start"] > size - logs.TAIL_BYTES
    assert chunk["text"].endswith("line 029999\n")
