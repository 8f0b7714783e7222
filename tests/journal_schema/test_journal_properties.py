"""Property: any history the table allows, committed as the engine would, reads back intact
and passes `journal verify`."""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import structs

from tests.helpers.journal import commit_all, create, job_name
from tests.states.state_strategies import BY_NAME, EXPECTED
from vibesys.journal_schema import decode_event, encode_event, iso, open_journal, verify_journal
from vibesys.states import (
    INITIAL,
    TERMINAL,
    Event,
    InfraFailed,
    JobState,
    SubmitIntended,
)

_UTC = st.just(UTC)


@st.composite
def engine_paths(draw: st.DrawFn, invocation_id: str) -> list[tuple[Event, JobState]]:
    """A random walk through the table; attempts count up under their stable names."""
    state, attempt, path = INITIAL, 0, []
    for _ in range(draw(st.integers(0, 14))):
        allowed = sorted(trigger for (src, trigger) in EXPECTED if src == state)
        if not allowed:
            break
        trigger = draw(st.sampled_from(allowed))
        if trigger == "SubmitIntended":
            attempt += 1
            event: Event = SubmitIntended(attempt, job_name(invocation_id, attempt))
        elif trigger == "InfraFailed":
            # The engine's `not_before` is a time or none: the journal reads it back as one.
            when = draw(st.none() | st.datetimes(min_value=datetime(2000, 1, 1), timezones=_UTC))
            event = structs.replace(
                draw(BY_NAME[trigger]), not_before="" if when is None else iso(when)
            )
        else:
            event = draw(BY_NAME[trigger])
        state = EXPECTED[(state, trigger)]
        path.append((event, state))
    return path


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_allowed_history_commits_reads_back_and_verifies(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        journal = open_journal(Path(tmp) / "journal.db")
        try:
            paths = {
                ident: data.draw(engine_paths(ident), label=ident) for ident in ("inv-a", "inv-b")
            }
            for ident, path in paths.items():
                inv = create(journal, ident)
                for event, _ in path:
                    inv = commit_all(journal, inv, [event])
                    # What commit_transition returns is what it stored.
                    assert inv == journal.invocations.get(ident)
                end = path[-1][1] if path else INITIAL
                assert inv.state == end
                assert inv.version == len(path)
                assert (inv.outcome is not None) == (end in TERMINAL)
                submits = [e for e, _ in path if isinstance(e, SubmitIntended)]
                assert [a.job_name for a in journal.invocations.attempts(ident)] == [
                    e.job_name for e in submits
                ]
                assert inv.retries == sum(isinstance(e, InfraFailed) for e, _ in path)
                history = journal.invocations.history(ident)
                assert [h.to_state for h in history] == [s for _, s in path]
                for row, (event, _) in zip(history, path, strict=True):
                    kind, evidence = encode_event(event)
                    assert (row.event, row.evidence) == (kind, json.loads(evidence))
                    assert decode_event(row.event, json.dumps(row.evidence)) == event
            assert verify_journal(journal) == []
        finally:
            journal.close()
