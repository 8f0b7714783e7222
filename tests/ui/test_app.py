"""Every endpoint of `vibesys ui` through Starlette's TestClient (in-process, fast): the pages,
the JSON API (the same objects as the CLI's --json), the token, the 4xx answers to bad input,
and the finite event stream of a finished invocation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.ui.journal_data import STDERR, T0, Ids, build
from vibesys.cli import read as cli_read
from vibesys.ui.app import create_app
from vibesys.ui.reader import JournalReader

TOKEN = "t0k3n-for-tests"
NOW = T0 + timedelta(days=1)


@pytest.fixture
def journal_ids(tmp_path: Path) -> tuple[Path, Ids]:
    path = tmp_path / "journal.db"
    return path, build(path)


@pytest.fixture
def client(journal_ids: tuple[Path, Ids]) -> Iterator[TestClient]:
    app = create_app(JournalReader(journal_ids[0]), TOKEN, clock=lambda: NOW)
    with TestClient(app, raise_server_exceptions=True) as test_client:
        yield test_client


def get(client: TestClient, path: str, **params: str) -> Any:
    return client.get(path, params={"token": TOKEN, **params})


def events_of(text: str) -> list[tuple[str, Any]]:
    found = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in lines:
            found.append((lines["event"], json.loads(lines["data"])))
    return found


def test_the_list_shows_every_invocation_with_its_counts(
    client: TestClient, journal_ids: tuple[Path, Ids]
) -> None:
    ids = journal_ids[1]
    page = get(client, "/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    for invocation in (ids.done, ids.retried, ids.sky, ids.prepared, ids.broker):
        assert f'data-id="{invocation}"' in page.text
    assert "smoke &lt;b&gt;" in page.text  # labels are escaped
    assert 'data-state="DONE">DONE<span class="n">1</span>' in page.text
    assert 'data-state="RUNNING">RUNNING<span class="n">3</span>' in page.text
    assert "campaign-7" in page.text
    assert "(Resources)" in page.text  # the scheduler's reason, while queued
    assert f'data-events="/events/list?token={TOKEN}"' in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"state": "DONE"}, ["done"]),
        ({"state": "running,prepared"}, ["broker", "prepared", "sky", "retried"]),
        ({"adapter": "sbatch"}, ["retried"]),
        ({"label": "smoke"}, ["done"]),
        ({"campaign": "campaign-7"}, ["sky"]),
        ({"since": "2030-01-01T12:00:00", "until": "2030-01-01T12:00:01"}, ["broker", "prepared",
         "sky", "retried", "done"]),
        ({"since": "1h"}, []),
        ({"until": "2029-12-31"}, []),
    ],
)  # fmt: skip
def test_filters(
    client: TestClient, journal_ids: tuple[Path, Ids], params: dict[str, str], expected: list[str]
) -> None:
    ids = journal_ids[1]
    listed = get(client, "/api/invocations", **params).json()
    assert [i["id"] for i in listed["invocations"]] == [getattr(ids, name) for name in expected]
    page = get(client, "/", **params)
    assert page.text.count("<tr data-id=") == len(expected)


def test_keyset_pages_walk_every_invocation_once(
    client: TestClient, journal_ids: tuple[Path, Ids]
) -> None:
    seen: list[str] = []
    listed = get(client, "/api/invocations", limit="2").json()
    assert listed["newer"] is None
    while True:
        seen += [i["id"] for i in listed["invocations"]]
        if listed["older"] is None:
            break
        listed = get(client, "/api/invocations", limit="2", before=listed["older"]).json()
    ids = journal_ids[1]
    assert seen == sorted([ids.done, ids.retried, ids.sky, ids.prepared, ids.broker], reverse=True)
    back = get(client, "/api/invocations", limit="2", after=seen[-1]).json()
    assert [i["id"] for i in back["invocations"]] == seen[-3:-1]
    assert back["counts"]["DONE"] == 1 and back["total"] == 5
    page = get(client, "/", limit="2", before=seen[1])
    assert "← newer" in page.text and "older →" in page.text


def test_the_api_is_what_journal_show_json_prints(
    client: TestClient, journal_ids: tuple[Path, Ids]
) -> None:
    path, ids = journal_ids
    for invocation in (ids.done, ids.retried, ids.sky):
        printed: list[str] = []
        cli_read.journal_show(path, invocation, True, out=printed.append)
        assert get(client, f"/api/invocations/{invocation}").json() == json.loads(printed[0])
    printed = []
    cli_read.journal_list(path, None, True, out=printed.append)
    api = get(client, "/api/invocations").json()
    cli = json.loads(printed[0])
    assert sorted(api["invocations"], key=lambda i: i["id"]) == sorted(
        cli["invocations"], key=lambda i: i["id"]
    )
    assert (api["counts"], api["total"]) == (cli["counts"], cli["count"])


def test_one_invocations_page(client: TestClient, journal_ids: tuple[Path, Ids]) -> None:
    ids = journal_ids[1]
    page = get(client, f"/inv/{ids.done}").text
    assert "&lt;b&gt;bold?&lt;/b&gt; &amp; café \ufffd end" in page  # escaped, decoded, replaced
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page
    assert "result.json" in page and "ab" * 32 in page and "1,234" in page
    assert 'data-column="settings"' in page and "retry_delay_seconds" in page
    assert 'class="state terminal visited current" data-state="DONE"' in page
    assert 'class="edge taken" data-edge="RUNNING-COLLECTING"' in page
    assert "data-events" not in page  # finished: nothing will change
    retried = get(client, f"/inv/{ids.retried}").text
    assert retried.count('class="lane-label"') == 2
    assert "mark mark-fence" in retried and "mark mark-retry" in retried
    assert "mark mark-fenced" in retried and "kind=fence by=test" in retried
    assert "span span-queued open" in retried and "Resources" in retried
    assert "partition</span> main" in retried
    assert f"/events/inv/{ids.retried}?token={TOKEN}&amp;attempt=2&amp;out=0&amp;err=0" in retried
    sky = get(client, f"/inv/{ids.sky}").text
    assert "vibesys-campaign-7-1a2b3c4d" in sky
    prepared = get(client, f"/inv/{ids.prepared}").text
    assert "No attempt yet" in prepared
    assert (
        'id="log-stdout" data-end="0" data-bound="65536"></pre>' in prepared
    )  # filled live once it starts
    assert f"/events/inv/{ids.prepared}?token={TOKEN}&amp;attempt=0" in prepared
    assert get(client, f"/inv/{ids.done[:14]}").status_code == 200  # a unique prefix
    older = get(client, f"/inv/{ids.retried}", attempt="1").text
    assert "Output of attempt <span" in older


def test_details_logs_states_clusters_broker(
    client: TestClient, journal_ids: tuple[Path, Ids]
) -> None:
    ids = journal_ids[1]
    details = get(client, f"/api/invocations/{ids.retried}/details").json()
    assert details["observation"]["reason"] == "Resources"
    assert [lane["attempt"] for lane in details["timeline"]] == [1, 2]
    assert {m["kind"] for m in details["timeline"][0]["marks"]} >= {"fence", "retry", "fenced"}
    done = get(client, f"/api/invocations/{ids.done}/details").json()
    assert done["recorded"]["settings"]["retry_delay_seconds"] == 25.0
    assert done["recorded"]["site_digest"] is None  # a local run has no site
    log = get(client, f"/api/invocations/{ids.done}/logs/stderr").json()
    assert log["text"] == STDERR.decode() and log["end"] == len(STDERR)
    part = get(client, f"/api/invocations/{ids.done}/logs/stdout", offset="3").json()
    assert part["start"] == 3 and part["text"].startswith("bold?")
    whole = get(client, f"/inv/{ids.done}/logs/stdout")
    assert whole.headers["content-type"] == "text/plain; charset=utf-8"
    assert whole.text == "<b>bold?</b> & café \ufffd end\n"
    states = get(client, "/api/states").json()
    assert {"from": "RUNNING", "to": "COLLECTING", "triggers": ["Finished"]} in states["edges"]
    assert states["from_any_state"] == [{"trigger": "Cancelled", "to": "DONE"}]
    clusters = get(client, "/api/clusters").json()
    leases = clusters["clusters"]
    assert clusters["count"] == len(leases)
    assert leases[0]["name"] == "vibesys-campaign-7-1a2b3c4d"
    assert leases[0]["uses"] == [{"invocation": ids.sky, "attempt": 1}]
    assert leases[0]["launched_at"] == "2030-01-01T12:00:00.000000+00:00"
    page = get(client, "/clusters").text
    assert "campaign-7" in page
    # launched as the journal writes it; released never ("-")
    assert "<td>2030-01-01T12:00:00.000000+00:00</td><td>-</td>" in page
    broker = get(client, "/api/broker").json()
    assert [b["id"] for b in broker["active"]] == [ids.broker] and broker["finished"] == []
    assert get(client, "/static/app.js").headers["content-type"].startswith("text/javascript")
    assert "svg.diagram" in get(client, "/static/app.css").text


def test_a_finished_invocations_event_stream_sends_its_state_its_output_and_ends(
    client: TestClient, journal_ids: tuple[Path, Ids]
) -> None:
    ids = journal_ids[1]
    stream = get(client, f"/events/inv/{ids.done}", attempt="1", out="13", err="0")
    assert stream.headers["content-type"].startswith("text/event-stream")
    found = events_of(stream.text)
    assert [kind for kind, _ in found] == ["html", "log", "log", "end"]
    assert set(found[0][1]) == {"inv-top", "inv-bottom"}
    assert found[1][1]["start"] == 13 and found[1][1]["text"] == "& caf\u00e9 \ufffd end\n"
    assert found[2][1]["stream"] == "stderr" and found[2][1]["text"] == STDERR.decode()
    resumed = client.get(
        f"/events/inv/{ids.done}",
        params={"token": TOKEN, "attempt": "1"},
        headers={"Last-Event-ID": f"1:{len(b'<b>bold?</b> & caf')}:{len(STDERR)}"},
    )
    assert [c["text"] for kind, c in events_of(resumed.text) if kind == "log"] == [
        "\u00e9 \ufffd end\n"
    ]


def test_the_token_is_required(client: TestClient, journal_ids: tuple[Path, Ids]) -> None:
    ids = journal_ids[1]
    for path in ("/", f"/inv/{ids.done}", "/static/app.css", "/events/list", "/nowhere"):
        refused = client.get(path)
        assert refused.status_code == 403 and "needs the token" in refused.text, path
        assert client.get(path, params={"token": TOKEN + "x"}).status_code == 403
    api = client.get(f"/api/invocations/{ids.done}")
    assert api.status_code == 403 and api.json()["status"] == 403 and "token" in api.json()["error"]
    bearer = client.get(
        f"/api/invocations/{ids.done}", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert bearer.status_code == 200 and bearer.json()["id"] == ids.done


@pytest.mark.parametrize(
    ("path", "params", "status", "needle"),
    [
        ("/inv/xyz!", {}, 400, "not an invocation id"),
        ("/inv/ffffffffffffffff", {}, 404, "no invocation ffffffffffffffff"),
        ("/inv/1a0000000000", {}, 400, "ambiguous"),
        ("/api/invocations/ffff", {}, 404, "no invocation"),
        ("/api/invocations/%00", {}, 400, "not an invocation id"),
        ("/inv/1a0000000000aaaa", {"attempt": "7"}, 404, "no attempt 7"),
        ("/inv/1a0000000000aaaa", {"attempt": "-1"}, 400, "attempt"),
        ("/inv/1a0000000000aaaa", {"attempt": "9" * 30}, 400, "attempt"),
        ("/inv/1a0000000000aaaa", {"bogus": "1"}, 400, "unknown parameter"),
        ("/inv/1a0000000000aaaa/logs/passwd", {}, 404, "no stream"),
        ("/inv/1a0000000000dddd/logs/stdout", {}, 404, "no attempt yet"),
        ("/", {"state": "SLEEPING"}, 400, "state='SLEEPING'"),
        ("/", {"since": "yesterday"}, 400, "since='yesterday'"),
        ("/", {"since": "999999w"}, 400, "since='999999w': out of range"),
        ("/", {"until": "0001-01-01T00:00+05:00"}, 400, "until='0001-01-01T00:00+05:00'"),
        ("/api/invocations", {"since": "9999-12-31T23:59-05:00"}, 400, "out of range"),
        ("/", {"limit": "0"}, 400, "limit"),
        ("/", {"before": "../etc"}, 400, "not an invocation id"),
        ("/", {"label": "x\x00y"}, 400, "printable"),
        ("/", {"nope": "1"}, 400, "unknown parameter"),
        ("/api/invocations", {"before": "1a", "after": "1b"}, 400, "not both"),
        ("/static/../journal_data.py", {}, 404, "no page"),
        ("/static/app.py", {}, 404, "no file"),
        ("/../../etc/passwd", {}, 404, "no page"),
        ("/events/inv/ffffffffffffffff", {}, 404, "no invocation"),
    ],
)  # fmt: skip
def test_bad_input_is_a_clear_4xx(
    client: TestClient, path: str, params: dict[str, str], status: int, needle: str
) -> None:
    answer = client.get(path, params={"token": TOKEN, **params})
    assert answer.status_code == status, answer.text
    body = answer.json()["error"] if path.startswith(("/api/", "/events/")) else answer.text
    assert needle in body.replace("&#39;", "'")
    assert "Traceback" not in answer.text


def test_requests_that_are_not_reads_are_refused(client: TestClient) -> None:
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        answer = client.request(method, "/", params={"token": TOKEN})
        assert answer.status_code == 405 and "only reads" in answer.text
    assert client.request("GET", "/", params={"token": TOKEN}, content=b"x" * 10).status_code == 413
    long_query = client.get("/", params={"token": TOKEN, "label": "x" * 5000})
    assert long_query.status_code == 414
    long_path = client.get("/inv/" + "a" * 2000, params={"token": TOKEN})
    assert long_path.status_code == 414
    assert client.head("/", params={"token": TOKEN}).status_code == 200
    big = client.get("/", params={"token": TOKEN}, headers={"X-Big": "x" * 20_000})
    assert big.status_code == 431 and "headers are larger" in big.text


def test_no_refusal_carries_the_token_or_the_journal_path(journal_ids: tuple[Path, Ids]) -> None:
    """Whoever is refused may not hold the token: a refusal is a bare page (or JSON) with
    neither the token nor the journal's path, whatever was refused and why."""
    path, ids = journal_ids
    app = create_app(JournalReader(path), TOKEN, hosts=["127.0.0.1:8000"])
    wrong = {"token": TOKEN[:-1] + "x"}
    with TestClient(app, base_url="http://127.0.0.1:8000") as ok:
        answers = [
            ok.get("/"),
            ok.get(f"/api/invocations/{ids.done}", params=wrong),
            ok.get(f"/inv/{ids.done}", headers={"Authorization": "Bearer nope"}),
            ok.request("POST", "/", params={"token": TOKEN}),
            ok.request("GET", "/", content=b"x" * 10),
            ok.get("/", params={"label": "x" * 5000}),
            ok.get("/inv/" + "a" * 2000),
            ok.get("/", headers={"X-Big": "x" * 20_000}),
            ok.get("/", params={"token": TOKEN, "since": "999999w"}),  # after the token: also bare
            ok.get("/nowhere", params={"token": TOKEN}),
        ]
    with TestClient(app, base_url="http://attacker.example:8000") as rebound:
        answers.append(rebound.get("/", params={"token": TOKEN}))
    assert [a.status_code for a in answers] == [
        403, 403, 403, 405, 413, 414, 414, 431, 400, 404, 400
    ]  # fmt: skip
    for answer in answers:
        assert TOKEN not in answer.text and str(path) not in answer.text, answer.status_code
        assert "token=" not in answer.text and "href" not in answer.text


def test_another_host_name_is_refused(journal_ids: tuple[Path, Ids]) -> None:
    app = create_app(JournalReader(journal_ids[0]), TOKEN, hosts=["127.0.0.1:8000"])
    with TestClient(app, base_url="http://127.0.0.1:8000") as ok:
        assert ok.get("/", params={"token": TOKEN}).status_code == 200
    with TestClient(app, base_url="http://attacker.example:8000") as rebound:
        answer = rebound.get("/", params={"token": TOKEN})
        assert answer.status_code == 400 and "Host" in answer.text


def test_a_journal_that_goes_away_or_is_damaged_is_a_503(
    journal_ids: tuple[Path, Ids], capsys: pytest.CaptureFixture[str]
) -> None:
    path, ids = journal_ids
    app = create_app(JournalReader(path), TOKEN)
    with TestClient(app) as client:
        path.write_bytes(b"this is not SQLite at all, not a journal" * 100)
        answer = get(client, "/")
        assert answer.status_code == 503 and "cannot be read" in answer.text
        assert str(path) not in answer.text  # what is wrong goes to the view's terminal
        path.unlink()
        gone = get(client, f"/api/invocations/{ids.done}")
        assert gone.status_code == 503 and "cannot be read" in gone.json()["error"]
    told = capsys.readouterr().err
    assert "not a vibesys journal" in told and "no journal at" in told


def test_a_failing_view_is_a_500_page_and_one_line(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from vibesys.ui import views

    def broken(*args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(views, "clusters_view", broken)
    with TestClient(client.app, raise_server_exceptions=False) as quiet:
        answer = get(quiet, "/clusters")
    assert answer.status_code == 500 and "Internal error" in answer.text
    assert "Traceback" not in answer.text and "boom" not in answer.text
    assert capsys.readouterr().err == "vibesys ui: error: RuntimeError: boom\n"


def test_a_campaigns_queue_is_shown_where_it_waits(journal_ids: tuple[Path, Ids]) -> None:
    from vibesys.journal_schema import open_journal

    path = journal_ids[0]
    store = open_journal(path)
    for name in ("queuehead000001", "queuewait000002"):
        store.create_invocation(
            invocation_id=name,
            adapter="local",
            command=["echo", name],
            request={},
            label=f"vibesys-eval accuracy {name}",
            max_retries=0,
            invocation_dir=f"/runs/{name}",
            campaign="campaign-9",
        )
    store.close()
    app = create_app(JournalReader(path), TOKEN, clock=lambda: NOW)
    with TestClient(app, raise_server_exceptions=True) as client:
        queue = get(client, "/api/queue").json()
        assert queue == {
            "waiting": [
                {
                    "invocation": "queuewait000002",
                    "label": "vibesys-eval accuracy queuewait000002",
                    "campaign": "campaign-9",
                    "position": 1,
                    "ahead": ["queuehead000001"],
                }
            ],
            "count": 1,
        }
        page = get(client, "/").text
        row = page[page.index('data-id="queuewait000002"') :].split("</tr>", 1)[0]
        assert "(waiting: 1 ahead)" in row and "campaign-9" in row
        head = page[page.index('data-id="queuehead000001"') :].split("</tr>", 1)[0]
        assert "waiting:" not in head  # its turn: nothing ahead
        clusters = get(client, "/clusters").text
        table = clusters[clusters.index('id="queue"') :].split("</table>", 1)[0]
        assert 'data-id="queuewait000002"' in table and "queuehead000001" in table
        listed = get(client, "/api/invocations").json()["invocations"]
        assert {row["id"] for row in listed} >= {"queuehead000001", "queuewait000002"}
