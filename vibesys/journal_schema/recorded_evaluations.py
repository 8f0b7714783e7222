"""The evaluation bridge's request ids (m010): which invocation each helper request names.

Write-ahead: a new request's row, naming the invocation id it will get, is committed before
that invocation is recorded, let alone submitted. Whoever finds the row later (the same
bridge after a dropped connection, a restarted one, another session of the campaign) follows
that invocation, or records it when a crash came between the two commits: a request id
never gets a second invocation.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Final

from msgspec import Struct

from vibesys.journal_schema.clock import moment, now_iso
from vibesys.journal_schema.journal_file import JournalFile

__all__ = ["CLIENT_RUN", "BridgeStore", "RecordedEvaluation"]

_COLUMNS = "run_id, request_id, invocation_id, uid, workspace, kind, body, results_dir, created_at"


#: The run id of `vibesys.Client`'s rows (a bridge run id starts with a letter or digit, so
#: none is this one); their body is the client's submission, its `timeout` included.
CLIENT_RUN: Final = ":client"


class RecordedEvaluation(Struct, frozen=True):
    run_id: str
    request_id: str
    invocation_id: str
    uid: int
    workspace: str
    kind: str
    #: the request as its identity: what a retry must repeat exactly
    body: dict[str, Any]
    results_dir: str | None
    created_at: datetime


def _row(values: tuple[Any, ...]) -> RecordedEvaluation:
    run_id, request_id, invocation_id, uid, workspace, kind, body, results, created = values
    body_json = json.loads(body)
    when = moment(created)
    return RecordedEvaluation(
        run_id, request_id, invocation_id, int(uid), workspace, kind, body_json, results, when
    )


class BridgeStore:
    """The journal's recorded evaluations, by run id and request id."""

    def __init__(self, file: JournalFile) -> None:
        self.conn = file.conn
        self.write_txn = file.write_txn

    def claim_evaluation(
        self,
        *,
        run_id: str,
        request_id: str,
        invocation_id: str,
        uid: int,
        workspace: str,
        kind: str,
        body: dict[str, Any],
        results_dir: str | None,
    ) -> tuple[RecordedEvaluation, bool]:
        """The row of (`run_id`, `request_id`): this one, committed now (True), or the one
        recorded first (False), whatever it says; the caller compares it."""
        with self.write_txn() as conn:
            inserted = conn.execute(
                f"INSERT OR IGNORE INTO bridge_requests ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    request_id,
                    invocation_id,
                    uid,
                    workspace,
                    kind,
                    json.dumps(body, sort_keys=True, separators=(",", ":")),
                    results_dir,
                    now_iso(),
                ),
            ).rowcount
            found = conn.execute(
                f"SELECT {_COLUMNS} FROM bridge_requests WHERE run_id=? AND request_id=?",
                (run_id, request_id),
            ).fetchone()
        return _row(found), inserted == 1

    def recorded_evaluation(self, run_id: str, request_id: str) -> RecordedEvaluation | None:
        found = self.conn.execute(
            f"SELECT {_COLUMNS} FROM bridge_requests WHERE run_id=? AND request_id=?",
            (run_id, request_id),
        ).fetchone()
        return None if found is None else _row(found)

    def recorded_evaluation_of(self, invocation_id: str) -> RecordedEvaluation | None:
        found = self.conn.execute(
            f"SELECT {_COLUMNS} FROM bridge_requests WHERE invocation_id=?", (invocation_id,)
        ).fetchone()
        return None if found is None else _row(found)

    def campaign_evaluations(self, run_id: str) -> list[RecordedEvaluation]:
        """Every request of one campaign, oldest first."""
        rows = self.conn.execute(
            f"SELECT {_COLUMNS} FROM bridge_requests WHERE run_id=? ORDER BY created_at, "
            "invocation_id",
            (run_id,),
        ).fetchall()
        return [_row(found) for found in rows]
