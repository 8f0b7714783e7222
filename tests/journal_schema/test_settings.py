"""The settings recorded with an invocation: a frozen model decoded strictly, once, when a row
is read; a record that is not one is a damaged journal, named by key."""

from __future__ import annotations

import json

import pytest

from tests.helpers.journal import NewInvocation
from vibesys.errors import JournalCorrupt
from vibesys.journal_schema import Journal, Settings

FULL = {
    "retry_delay_seconds": 25.0,
    "retry_backoff": 2.0,
    "retry_max_delay_seconds": 300.0,
    "unreachable_timeout_seconds": 600,
    "cancel_when_orphaned": False,
}


def test_a_record_round_trips() -> None:
    settings = Settings.loads(json.dumps(FULL))
    assert settings.unreachable_timeout_seconds == 600 and settings.retry_delay_seconds == 25.0
    assert Settings.loads(settings.dumps()) == settings
    with pytest.raises(AttributeError):
        settings.retry_delay_seconds = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("change", "names"),
    [
        ({"retry_delay_seconds": "25"}, "retry_delay_seconds must be a number"),
        ({"retry_delay_seconds": True}, "retry_delay_seconds must be a number"),
        ({"unreachable_timeout_seconds": -1}, "unreachable_timeout_seconds must be finite"),
        ({"retry_max_delay_seconds": float("inf")}, "retry_max_delay_seconds must be finite"),
        ({"retry_backoff": 0.5}, "retry_backoff must be >= 1"),
        ({"cancel_when_orphaned": 1}, "cancel_when_orphaned must be true or false"),
        ({"patience": 3}, "unknown key 'patience'"),
        ({"retry_backoff": None}, "retry_backoff must be a number"),
    ],
)
def test_anything_else_is_refused_by_name(change: dict[str, object], names: str) -> None:
    with pytest.raises(JournalCorrupt, match=names):
        Settings.from_json({**FULL, **change})


def test_a_missing_key_or_record_is_refused() -> None:
    partial = {k: v for k, v in FULL.items() if k != "retry_backoff"}
    with pytest.raises(JournalCorrupt, match="retry_backoff is missing"):
        Settings.from_json(partial)
    for text, names in (
        (None, "no recorded settings"),
        ("[1]", "not a JSON object"),
        ("{", "not JSON"),
    ):
        with pytest.raises(JournalCorrupt, match=names):
            Settings.loads(text)


def test_the_row_holds_them_and_a_damaged_one_is_named(
    journal: Journal, new_invocation: NewInvocation
) -> None:
    inv = new_invocation("inv-set", settings=Settings(retry_delay_seconds=9.0))
    assert journal.invocations.get(inv.id).settings.retry_delay_seconds == 9.0
    journal.conn.execute("UPDATE invocations SET settings=? WHERE id=?", ('{"x": 1}', inv.id))
    with pytest.raises(JournalCorrupt, match="unknown key 'x'"):
        journal.invocations.get(inv.id)
