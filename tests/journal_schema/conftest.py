"""Fixtures for the journal tests: a fresh journal on disk and a factory of invocations."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.helpers.journal import Drive, NewInvocation, commit_all, create
from vibesys.journal_schema import Invocation, Journal, open_journal
from vibesys.states import Event


@pytest.fixture
def journal_file(tmp_path: Path) -> Path:
    return tmp_path / "journal.db"


@pytest.fixture
def journal(journal_file: Path) -> Iterator[Journal]:
    store = open_journal(journal_file)
    yield store
    store.close()


@pytest.fixture
def new_invocation(journal: Journal) -> NewInvocation:
    """Create an invocation in `journal` (keyword overrides go to create_invocation)."""

    def make(invocation_id: str = "inv0001", **overrides: object) -> Invocation:
        return create(journal, invocation_id, **overrides)

    return make


@pytest.fixture
def drive(journal: Journal) -> Drive:
    """Commit a list of events to an invocation of `journal`; returns it after the last."""

    def run(current: Invocation, events: Sequence[Event]) -> Invocation:
        return commit_all(journal, current, events)

    return run
