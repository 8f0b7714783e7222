"""Which of an invocation's recorded columns the page shows where: the one place to wire a
new column.

The summary shows the columns in SHOWN in its own way; HIDDEN ones are never shown (the
environment file holds the job's environment, which may hold secrets, so not even its path
goes out). Every other column of the `invocations` row, present or added by a later migration,
is shown under "recorded with it" with the title RECORDED gives it (else its name), a JSON
value parsed and shown as JSON: so what a migration adds (the settings an invocation was
carried on with, the digest of the site's configuration) shows up without a change here, and
one line here gives it a title.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import msgspec

#: Shown by the summary, the attempts or the history.
SHOWN = frozenset(
    {
        "id",
        "label",
        "adapter",
        "command",
        "request",
        "request_version",
        "cwd",
        "state",
        "version",
        "attempt",
        "max_retries",
        "retries",
        "outcome",
        "exit_code",
        "failure_class",
        "cancel_requested",
        "not_before",
        "invocation_dir",
        "created_at",
        "updated_at",
        "lease_owner",
        "lease_expires_at",
    }
)
HIDDEN = frozenset({"env_file"})
#: Titles of recorded columns; a column not named here is shown under its own name.
RECORDED = {
    "settings": "settings",
    "site_digest": "site configuration digest",
}


class Field(msgspec.Struct, frozen=True):
    column: str
    title: str
    #: the value as stored, or parsed when it is JSON text
    value: Any
    is_json: bool

    @property
    def text(self) -> str:
        if self.is_json:
            return json.dumps(self.value, indent=2, sort_keys=True)
        return "" if self.value is None else str(self.value)


def recorded(conn: sqlite3.Connection, invocation_id: str) -> list[Field]:
    """The row's columns that neither SHOWN nor HIDDEN name, in the table's order."""
    cursor = conn.execute("SELECT * FROM invocations WHERE id=?", (invocation_id,))
    row = cursor.fetchone()
    if row is None:
        return []
    found = []
    for column, value in zip((c[0] for c in cursor.description), row, strict=True):
        if column in SHOWN or column in HIDDEN:
            continue
        parsed, is_json = _json(value)
        found.append(Field(column, RECORDED.get(column, column), parsed, is_json))
    return found


def _json(value: Any) -> tuple[Any, bool]:
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value), True
        except ValueError:
            pass
    return value, False


def recorded_json(fields: list[Field]) -> dict[str, Any]:
    return {f.column: f.value for f in fields}
