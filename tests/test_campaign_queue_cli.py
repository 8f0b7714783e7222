"""The campaign queue as a user sees it: `journal list` shows who waits and how many are ahead
(`--json`: `waiting`), `journal show` names its place, `reconcile` leaves a waiting
invocation as it is and says why; once the one ahead has ended, the next is its turn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers.cli import vibesys_cli
from vibesys.journal_schema import open_journal
from vibesys.states import Cancelled


def record(path: Path, invocation_id: str, campaign: str | None) -> None:
    store = open_journal(path)
    try:
        store.create_invocation(
            invocation_id=invocation_id,
            adapter="local",
            command=["echo", invocation_id],
            request={},
            label=None,
            max_retries=0,
            invocation_dir=str(path.parent / "runs" / invocation_id),
            campaign=campaign,
        )
    finally:
        store.close()


def listed(out: str) -> list[dict[str, Any]]:
    shown = json.loads(out)
    rows: list[dict[str, Any]] = shown["invocations"] if isinstance(shown, dict) else shown
    return rows


def test_who_waits_in_a_campaign_queue_and_for_whom(tmp_path: Path) -> None:
    path = tmp_path / ".vibesys" / "journal.db"
    path.parent.mkdir()
    record(path, "first0000000001", "c-1")
    record(path, "second000000002", "c-1")
    record(path, "third0000000003", "c-1")
    record(path, "alone0000000004", None)
    text = vibesys_cli("journal", "list", cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    states = {line.split()[0]: line.split()[1:3] for line in text.stdout.splitlines()[1:]}
    assert states["first0000000001"][0] == "PREPARED"  # its turn: nothing ahead
    assert states["second000000002"] == ["WAITING", "(1"]
    assert states["third0000000003"] == ["WAITING", "(2"]
    assert states["alone0000000004"][0] == "PREPARED"
    rows = {
        row["id"]: row
        for row in listed(vibesys_cli("journal", "list", "--json", cwd=tmp_path).stdout)
    }
    assert rows["third0000000003"]["waiting"] == {
        "campaign": "c-1",
        "position": 2,
        "ahead": ["first0000000001", "second000000002"],
    }
    assert (
        rows["first0000000001"]["waiting"] is None
        and rows["third0000000003"]["state"] == "PREPARED"
    )
    shown = vibesys_cli("journal", "show", "second", cwd=tmp_path)
    assert (
        "waiting  waiting in campaign c-1's queue: 1 ahead (first0000000001 first" in shown.stdout
    )
    as_json = json.loads(vibesys_cli("journal", "show", "third", "--json", cwd=tmp_path).stdout)
    assert as_json["queue"]["position"] == 2

    store = open_journal(path)
    store.commit_transition(store.invocations.get("first0000000001"), Cancelled("not wanted"))
    store.close()
    rows = {
        row["id"]: row
        for row in listed(vibesys_cli("journal", "list", "--json", cwd=tmp_path).stdout)
    }
    assert rows["second000000002"]["waiting"] is None  # its turn now
    assert rows["third0000000003"]["waiting"]["ahead"] == ["second000000002"]


def test_reconcile_leaves_a_waiting_invocation_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / ".vibesys" / "journal.db"
    path.parent.mkdir()
    gate = tmp_path / "gate"
    running = vibesys_cli(
        "run",
        "--detach",
        "--",
        "sh",
        "-c",
        f"while [ ! -e {gate} ]; do sleep 0.1; done",
        cwd=tmp_path,
    )
    assert running.returncode == 0, running.stderr
    first = running.stdout.strip()
    store = open_journal(path)
    store.conn.execute(
        "INSERT INTO campaign_queue (campaign, invocation_id, joined_at) VALUES ('c-1', ?, '')",
        (first,),
    )
    store.close()
    record(path, "waiting00000001", "c-1")
    try:
        done = vibesys_cli("reconcile", cwd=tmp_path)
        assert "waiting00000001" in done.stdout
        line = next(row for row in done.stdout.splitlines() if "waiting00000001" in row)
        assert f"left as it is: waiting in campaign c-1's queue: 1 ahead ({first} first" in line
        store = open_journal(path, readonly=True)
        assert store.invocations.get("waiting00000001").state == "PREPARED"  # nothing was sent
        store.close()
    finally:
        gate.touch()
        vibesys_cli("wait", first, cwd=tmp_path)
    after = vibesys_cli("reconcile", cwd=tmp_path)
    assert after.returncode == 0, after.stdout + after.stderr
    store = open_journal(path, readonly=True)
    assert store.invocations.get("waiting00000001").state in (
        "RUNNING",
        "DONE",
    )  # its turn came: submitted
    store.close()
    waited = vibesys_cli("wait", "waiting00000001", cwd=tmp_path)
    assert waited.returncode == 0 and waited.stdout == "waiting00000001\n", waited.stderr
