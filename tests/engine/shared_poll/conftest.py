"""The shared-poll tests' scripted backend and fixtures (engine/shared_poll.py: one poll budget
per host and site): a fake that declares its status calls shared, two engines standing for two
processes on this host, each with its own connection to one journal and its own owner
identity, both reaching one scheduler. No timings: the clock is the engines' own, moved by
hand.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from vibesys.adapters.base import JobRef, PollSchedule, RemoteState
from vibesys.adapters.fake import FakeAttempt, FakeBackend
from vibesys.engine import Engine, RetryPolicy
from vibesys.journal_schema import Invocation, Journal, iso, open_journal
from vibesys.states import JobState

S = RemoteState
SITE = "fake-site"


class SharedFake(FakeBackend):
    """The fake scheduler, declaring its status calls shared per site (SharedPolling)."""

    def __init__(self, attempts: list[FakeAttempt] | None = None) -> None:
        super().__init__(attempts)
        self.floor = 0.0
        self.settle = 0.0
        self.settle_max = 0.0
        #: job names whose end marker a probe finds
        self.ended: set[str] = set()
        self.probes: list[list[str]] = []
        self.facts_asked = 0

    # -- what the engine may ask of it (adapters.base.Backend) ---------------------------

    def shared_polling(self) -> SharedFake:
        return self

    def poll_site(self) -> str:
        return SITE

    def site_facts(self) -> dict[str, str]:
        self.facts_asked += 1
        return {"SlurmctldParameters": "(null)"}

    def poll_schedule(self, facts: object) -> PollSchedule:
        return PollSchedule(
            self.floor, 2.0, 30.0, 2.0, 0.25, settle=self.settle, settle_max=self.settle_max
        )

    def probe(self, jobs: Sequence[JobRef]) -> set[str]:
        self.probes.append([j.job_name for j in jobs])
        return {j.job_name for j in jobs} & self.ended

    def status_calls(self) -> list[list[str]]:
        return [names.split(",") for kind, names in self.calls if kind == "status"]


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def fake() -> SharedFake:
    return SharedFake([FakeAttempt((S.RUNNING,)), FakeAttempt((S.RUNNING,))])


@pytest.fixture
def second_journal(journal: Journal) -> Iterator[Journal]:
    other = open_journal(journal.path)
    yield other
    other.close()


def engine(journal: Journal, fake: FakeBackend, clock: Clock, owner: str) -> Engine:
    return Engine(
        journal,
        lambda name, request: fake,
        retry=RetryPolicy(max_retries=2, initial_delay_seconds=0.0),
        owner=owner,
        clock=clock,
    )


def running(eng: Engine, tmp_path: Path) -> Invocation:
    """A new invocation, submitted: RUNNING and waiting for its first observation."""
    inv = eng.prepare(adapter="fake", command=["x"], run_root=tmp_path / "runs")
    inv = eng.advance(inv)
    assert inv.state is JobState.RUNNING
    return inv


def make_due(journal: Journal, clock: Clock) -> None:
    with journal.write_txn() as conn:
        conn.execute("UPDATE poll_sites SET due_at=? WHERE site=?", (iso(clock()), SITE))


def take_lease(journal: Journal, holder: str, clock: Clock) -> None:
    with journal.write_txn() as conn:
        conn.execute(
            "UPDATE poll_sites SET poller=?, poller_expires_at=? WHERE site=?",
            (holder, iso(clock() + timedelta(hours=1)), SITE),
        )
