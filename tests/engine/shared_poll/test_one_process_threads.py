"""Threads of one process (a client's handles, the bridge's evaluations) share its owner
identity, which the poller lease cannot tell apart: while one of them runs the site's round,
another that finds the round due runs none of its own."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.engine.shared_poll.conftest import Clock, SharedFake, engine, make_due, running
from vibesys.adapters.base import JobRef, RemoteStatus
from vibesys.journal_schema import Journal, open_journal

OWNER = "here:1:1"


def test_a_second_thread_runs_no_round_while_the_first_runs_one(
    journal: Journal,
    second_journal: Journal,
    fake: SharedFake,
    clock: Clock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inv_a = running(engine(journal, fake, clock, OWNER), tmp_path)
    other = engine(second_journal, fake, clock, OWNER)
    inv_b = running(other, tmp_path)
    clock.advance(5)
    make_due(journal, clock)
    asked: list[list[str]] = []
    entered, release = threading.Event(), threading.Event()
    original = fake.status

    def status(jobs: Sequence[JobRef]) -> dict[str, RemoteStatus]:
        asked.append([job.job_name for job in jobs])
        if not entered.is_set():  # the first round stays under way until released
            entered.set()
            release.wait(10)
        return original(jobs)

    monkeypatch.setattr(fake, "status", status)

    def first() -> None:
        own = open_journal(journal.path)  # a connection stays on its thread
        try:
            engine(own, fake, clock, OWNER).observe(own.invocations.get(inv_a.id))
        finally:
            own.close()

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert entered.wait(10)
        assert (
            other.observe(second_journal.invocations.get(inv_b.id)) is None
        )  # the round is not read yet
        assert len(asked) == 1
    finally:
        release.set()
        thread.join(10)
    assert len(asked) == 1
