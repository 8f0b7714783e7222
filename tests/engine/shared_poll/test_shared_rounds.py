"""One scheduler query per round for every process on the host: two drivers share it, the
site's facts are read once, reconcile uses the site's round (and asks anew when it must), and a
retried invocation is watched again after a round forgot it."""

from __future__ import annotations

from pathlib import Path

from tests.engine.shared_poll.conftest import (
    SITE,
    Clock,
    S,
    SharedFake,
    engine,
    make_due,
    running,
)
from vibesys.adapters.fake import FakeAttempt
from vibesys.engine import DriveOptions, Engine, RetryPolicy, drive, reconcile
from vibesys.engine.seen import Sight
from vibesys.journal_schema import Journal
from vibesys.states import JobState


def test_two_drivers_share_one_query_per_round(
    journal: Journal, second_journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    b = engine(second_journal, fake, clock, "elsewhere:2:1")
    inv_a, inv_b = running(a, tmp_path), running(b, tmp_path)
    # Each submission's first look found no round for its version yet: at most the one round
    # that ran then, which the other had not registered for.
    before = len(fake.status_calls())
    assert before <= 2
    for _ in range(3):
        clock.advance(5)
        make_due(journal, clock)
        seen_a = a.observe(journal.invocations.get(inv_a.id))
        seen_b = b.observe(second_journal.invocations.get(inv_b.id))
        assert seen_a is not None and seen_a.sight is Sight.RUNNING
        assert seen_b is not None and seen_b.sight is Sight.RUNNING
    rounds = fake.status_calls()[before:]
    # One scheduler query per round, for both invocations, whoever ran it.
    assert len(rounds) == 3
    names = {f"vibesys-{inv_a.id}-1", f"vibesys-{inv_b.id}-1"}
    assert all(set(r) == names for r in rounds)
    assert a.shared.rounds_run + b.shared.rounds_run == before + 3
    site = journal.polls.poll_site(SITE)
    assert site is not None and site.round == before + 3


def test_the_site_facts_are_read_once_for_every_process(
    journal: Journal, second_journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    b = engine(second_journal, fake, clock, "elsewhere:2:1")
    inv_a, inv_b = running(a, tmp_path), running(b, tmp_path)
    for _ in range(3):
        clock.advance(5)
        make_due(journal, clock)
        b.observe(second_journal.invocations.get(inv_b.id))
        a.observe(journal.invocations.get(inv_a.id))
    assert fake.facts_asked == 1
    site = journal.polls.poll_site(SITE)
    assert site is not None and site.facts == {"SlurmctldParameters": "(null)"}


def test_reconcile_uses_the_sites_round(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    invs = [running(a, tmp_path) for _ in range(2)]
    for inv in invs:
        journal.leases.release_lease(inv.id, a.owner)
    calls = len(fake.status_calls())
    clock.advance(5)
    rows = reconcile(engine(journal, fake, clock, "elsewhere:4:1"))
    assert [r.after for r in rows] == [JobState.RUNNING, JobState.RUNNING]
    assert len(fake.status_calls()) == calls + 1
    assert set(fake.status_calls()[-1]) == {f"vibesys-{inv.id}-1" for inv in invs}


def test_a_shared_site_drives_to_the_end(journal: Journal, tmp_path: Path) -> None:
    fake = SharedFake([FakeAttempt((S.PENDING, S.RUNNING, S.COMPLETED), exit_code=0)])
    eng = Engine(journal, lambda name, request: fake)
    inv = eng.prepare(adapter="fake", command=["x"], run_root=tmp_path / "runs")
    fake.floor = 0.0
    done = drive(eng, inv, DriveOptions())
    assert done.state is JobState.DONE and done.exit_code == 0


def test_reconcile_asks_anew_even_after_a_recent_round(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    inv = running(a, tmp_path)
    make_due(journal, clock)
    assert a.observe(journal.invocations.get(inv.id)) is not None
    journal.leases.release_lease(inv.id, a.owner)
    calls = len(fake.status_calls())
    clock.advance(1)  # the floor (0 here) allows a round; the schedule's next one is later
    reconcile(engine(journal, fake, clock, "elsewhere:4:1"))
    assert len(fake.status_calls()) == calls + 1


def test_a_retried_invocation_is_watched_again_after_a_round_forgot_it(
    journal: Journal, second_journal: Journal, clock: Clock, tmp_path: Path
) -> None:
    fake = SharedFake([FakeAttempt((S.PREEMPTED,)), FakeAttempt((S.RUNNING, S.COMPLETED))])
    a = engine(journal, fake, clock, "elsewhere:1:1")
    a.retry = RetryPolicy(max_retries=2, initial_delay_seconds=2.0)  # a backoff to forget in
    other = engine(second_journal, fake, clock, "elsewhere:2:1")
    inv = running(a, tmp_path)
    make_due(journal, clock)
    inv = a.advance(journal.invocations.get(inv.id))  # the round sees PREEMPTED: RETRYING
    assert inv.state is JobState.RETRYING
    # Another process's round meanwhile forgets it: it needs no observation while RETRYING.
    clock.advance(5)
    make_due(journal, clock)
    other_inv = running(other, tmp_path)
    make_due(journal, clock)
    assert other.observe(second_journal.invocations.get(other_inv.id)) is not None
    assert journal.polls.observation(SITE, inv.id) is None
    # Attempt 2 runs: its driver must register it again, or no round would ever look at it.
    clock.advance(5)
    inv = a.advance(journal.invocations.get(inv.id))
    assert (inv.state, inv.attempt) == (JobState.RUNNING, 2)
    for _ in range(6):
        clock.advance(5)
        make_due(journal, clock)
        inv = a.advance(journal.invocations.get(inv.id))
    assert inv.state is JobState.DONE and inv.outcome is not None
    assert inv.outcome.value == "COMPLETED"
