"""`vibesys ui` as a user runs it: one URL on 127.0.0.1 with a token, refusals over real HTTP
(uvicorn's own limits included), bad journals and a taken port as one line and exit 2; and
the list's event stream, which sends the list again when the journal changes."""

from __future__ import annotations

import http.client
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import anyio

from tests.helpers.ui import Server
from tests.ui.journal_data import T0, build
from vibesys.journal_schema import open_journal
from vibesys.ui.app import Ui
from vibesys.ui.events import list_events
from vibesys.ui.queries import ListFilter
from vibesys.ui.reader import JournalReader


def request(server: Server, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    parts = urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, answer.read().decode()
    finally:
        conn.close()


def test_it_serves_one_url_on_loopback_and_refuses_what_it_must(
    tmp_path: Path, serve_ui: Callable[..., Server]
) -> None:
    path = tmp_path / "journal.db"
    ids = build(path)
    server = serve_ui(path)
    assert urlsplit(server.url).hostname == "127.0.0.1" and len(server.token) >= 32
    status, body = request(server, f"/?token={server.token}")
    assert status == 200 and ids.done in body
    assert request(server, "/")[0] == 403
    assert request(server, f"/inv/{ids.done}?token=wrong")[0] == 403
    assert request(server, f"/?token={server.token}", {"Host": "evil.example"})[0] == 400
    assert request(server, f"/?token={server.token}", {"X-Big": "x" * 20_000})[0] == 431
    try:  # past uvicorn's own limit on a request's head: a 400, or the connection is cut
        huge = request(server, f"/?token={server.token}", {"X-Big": "x" * 200_000})[0]
    except ConnectionResetError:
        huge = 400
    assert 400 <= huge < 500
    # Ctrl-C with a live page open: the stream ends, the server stops at once and quietly.
    parts = urlsplit(server.url)
    stream = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    stream.request("GET", f"/events/list?token={server.token}")
    answer = stream.getresponse()
    assert answer.status == 200 and answer.readline() == b"event: html\n"
    server.process.send_signal(signal.SIGINT)
    _, stderr = server.process.communicate(timeout=10)
    stream.close()
    assert server.process.returncode == 130 and stderr == ""  # as any interrupted command


def test_bad_journals_and_a_taken_port_are_one_line(tmp_path: Path) -> None:
    def ui(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "vibesys", "ui", *args],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )

    missing = ui("--journal", str(tmp_path / "nothing.db"))
    assert missing.returncode == 2 and missing.stdout == ""
    assert (
        missing.stderr.startswith("vibesys: error: no journal at")
        and missing.stderr.count("\n") == 1
    )
    text = tmp_path / "notes.db"
    text.write_text("not sqlite")
    refused = ui("--journal", str(text))
    assert refused.returncode == 2 and "is not a vibesys journal" in refused.stderr
    assert refused.stderr.count("\n") == 1
    path = tmp_path / "journal.db"
    open_journal(path).close()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = ui("--journal", str(path), "--port", str(port))
    assert busy.returncode == 2
    assert busy.stderr.startswith(f"vibesys: error: cannot listen on 127.0.0.1:{port}")
    assert ui("--journal", str(path), "--port", "70000").returncode == 2


def test_the_list_stream_sends_the_list_again_when_the_journal_changes(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    build(path)
    live = Ui(JournalReader(path), "token", lambda: T0)

    async def first_two() -> list[bytes]:
        stream = list_events(live, ListFilter())
        got = [await anext(stream)]
        journal = open_journal(path)
        journal.create_invocation(
            invocation_id="1c00000000000001",
            adapter="local",
            command=["true"],
            request={},
            label="new",
            max_retries=0,
            invocation_dir="/r",
        )
        journal.close()
        got.append(await anext(stream))
        await stream.aclose()  # type: ignore[attr-defined]
        return got

    first, second = anyio.run(first_two)
    assert first.startswith(b"event: html\n") and b"1c00000000000001" not in first
    assert b"1c00000000000001" in second and b"list-live" in second
