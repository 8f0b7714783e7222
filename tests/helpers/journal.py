"""Helpers shared by the journal tests (their fixtures are in tests/journal_schema/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from vibesys.journal_schema import Invocation, Journal
from vibesys.states import Event

#: The fixtures `new_invocation` (keyword overrides go to create_invocation) and `drive`
#: (commits events to an invocation, returns it after the last).
NewInvocation = Callable[..., Invocation]
Drive = Callable[[Invocation, Sequence[Event]], Invocation]

#: A fixed moment, so recorded times are predictable.
T0 = datetime(2030, 1, 1, tzinfo=UTC)


def job_name(invocation_id: str, attempt: int) -> str:
    """The stable job name, derived from the invocation id and the attempt."""
    return f"vibesys-{invocation_id}-{attempt}"


def create(journal: Journal, invocation_id: str, **overrides: object) -> Invocation:
    fields: dict[str, object] = {
        "adapter": "local",
        "command": ["python", "-c", "print('hi')"],
        "request": {"artifacts": ["out.json"]},
        "label": None,
        "max_retries": 2,
        "invocation_dir": f"/runs/{invocation_id}",
        "now": T0,
    }
    fields.update(overrides)
    return journal.create_invocation(invocation_id=invocation_id, **fields)  # type: ignore[arg-type]


def commit_all(journal: Journal, current: Invocation, events: Sequence[Event]) -> Invocation:
    """Commit `events` in order and return the invocation after the last.

    History row `seq` is recorded at T0 + `seq` seconds.
    """
    for event in events:
        moment = T0 + timedelta(seconds=current.version + 1)
        current, _ = journal.commit_transition(current, event, now=moment)
    return current
