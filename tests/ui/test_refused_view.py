"""The web view of an invocation whose site refused our login (an expired SSH certificate):
its page names the credential and the renewal, not an outage."""

from __future__ import annotations

import json
from pathlib import Path

from starlette.testclient import TestClient

from tests.ui.journal_data import build
from tests.ui.test_app import NOW, TOKEN, get
from vibesys.ui.app import create_app
from vibesys.ui.reader import JournalReader


def test_a_refused_login_is_shown_with_the_credential_and_its_renewal(tmp_path: Path) -> None:
    from vibesys.journal_schema import open_journal

    path = tmp_path / "journal.db"
    ids = build(path)
    said = "connect to op@login:22: login refused: the SSH certificate /k/id-cert.pub expired at T"
    fix = "renew the SSH certificate /k/id-cert.pub with the site's tool"
    store = open_journal(path)
    with store.write_txn() as conn:
        conn.execute(
            "UPDATE poll_watch SET seen=? WHERE invocation_id=?",
            (json.dumps({"sight": "unreachable", "evidence": said, "fix": fix}), ids.retried),
        )
    store.close()
    app = create_app(JournalReader(path), TOKEN, clock=lambda: NOW)
    with TestClient(app, raise_server_exceptions=True) as client:
        page = get(client, f"/inv/{ids.retried}").text
    assert f'<div class="refused" id="refused">login refused: {said}<br>fix: ' in page
    assert "renew the SSH certificate /k/id-cert.pub with the site&#39;s tool" in page
