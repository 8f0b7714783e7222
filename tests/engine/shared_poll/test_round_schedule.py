"""When a site's shared round is due: a new job's initial delay (shared by a burst of
submissions, never put off for ever by a stream), a probe that finds an end and brings the
round forward, ends found together confirmed by one round, and the floor between rounds."""

from __future__ import annotations

from datetime import timedelta
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
from vibesys.journal_schema import Journal


def test_newly_watched_jobs_wait_the_initial_delay_for_their_first_round(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    inv = running(a, tmp_path)  # its first look registered it
    assert fake.status_calls() == []  # just submitted: no scheduler query yet
    clock.advance(1.9)
    assert a.observe(journal.invocations.get(inv.id)) is None
    assert fake.status_calls() == []
    clock.advance(0.2)  # 2 s, the schedule's initial delay
    assert a.observe(journal.invocations.get(inv.id)) is not None
    assert len(fake.status_calls()) == 1


def test_a_burst_of_submissions_gets_one_first_round_when_its_newest_is_due(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    first = running(a, tmp_path)
    clock.advance(1.0)
    second = running(a, tmp_path)  # one second later: the first look waits for it too
    clock.advance(1.5)  # 2.5 s: the first job's initial delay is past, the second's is not
    assert a.observe(journal.invocations.get(first.id)) is None
    assert fake.status_calls() == []
    clock.advance(0.6)  # 3.1 s: the second's is past; one round sees both
    assert a.observe(journal.invocations.get(first.id)) is not None
    assert a.observe(journal.invocations.get(second.id)) is not None
    assert len(fake.status_calls()) == 1


def test_a_stream_of_submissions_does_not_put_the_first_round_off_for_ever(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    first = running(a, tmp_path)
    for _ in range(6):  # a new job every 0.7 s
        clock.advance(0.7)
        running(a, tmp_path)
        if fake.status_calls():
            break
    # The oldest waits at most twice the initial delay (2 s) for its first round.
    clock.advance(max(0.0, 4.0 - 0.7 * 6) + 0.01)
    a.observe(journal.invocations.get(first.id))
    assert len(fake.status_calls()) == 1


def test_a_round_not_yet_due_is_not_run(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    inv = running(a, tmp_path)
    clock.advance(1)
    calls = len(fake.status_calls())
    assert a.observe(journal.invocations.get(inv.id)) is None  # read already, next round not due
    assert len(fake.status_calls()) == calls
    assert 0 < a.shared.pause(journal.invocations.get(inv.id), fake) <= 1.0


def test_a_probe_that_finds_an_end_brings_the_round_forward(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    fake.settle = 0.5  # no other job runs: nobody to wait for
    a = engine(journal, fake, clock, "elsewhere:1:1")
    inv = running(a, tmp_path)
    fake.probes.clear()
    rounds = len(fake.status_calls())
    clock.advance(0.5)  # the next round is 2 s away; the probe is due
    assert a.observe(journal.invocations.get(inv.id)) is None
    assert fake.probes == [[f"vibesys-{inv.id}-1"]]
    assert len(fake.status_calls()) == rounds  # a probe is no scheduler query
    fake.ended.add(f"vibesys-{inv.id}-1")
    clock.advance(0.5)
    assert a.observe(journal.invocations.get(inv.id)) is None  # this probe finds the marker...
    assert a.observe(journal.invocations.get(inv.id)) is not None  # ... and the round runs at once
    assert len(fake.status_calls()) == rounds + 1


def test_ends_found_one_after_another_are_confirmed_by_one_round(
    journal: Journal, second_journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    fake.settle, fake.settle_max = 1.0, 3.0
    fake.attempts.append(FakeAttempt((S.RUNNING,)))
    a = engine(journal, fake, clock, "elsewhere:1:1")
    b = engine(second_journal, fake, clock, "elsewhere:2:1")
    inv_a, inv_b, still = running(a, tmp_path), running(b, tmp_path), running(a, tmp_path)
    names = [f"vibesys-{inv.id}-1" for inv in (inv_a, inv_b, still)]
    rounds = len(fake.status_calls())
    fake.ended.add(names[0])
    clock.advance(0.5)
    assert (
        a.observe(journal.invocations.get(inv_a.id)) is None
    )  # the probe finds a's end: a round in 1 s
    assert len(fake.status_calls()) == rounds
    first = clock()
    clock.advance(0.25)
    assert (
        a.observe(journal.invocations.get(inv_a.id)) is None
    )  # the same end again puts nothing off
    assert journal.polls.poll_site(SITE).next_due() == first + timedelta(seconds=1)  # type: ignore[union-attr]
    fake.ended.add(names[1])
    clock.advance(0.25)
    # b's probe finds b's end too: the round waits `settle` again, for more to come.
    assert b.observe(second_journal.invocations.get(inv_b.id)) is None
    assert len(fake.status_calls()) == rounds
    due = journal.polls.poll_site(SITE).next_due()  # type: ignore[union-attr]
    assert due == clock() + timedelta(seconds=1)
    clock.advance(0.5)
    assert a.observe(journal.invocations.get(inv_a.id)) is None  # no longer due at a's own settle
    assert len(fake.status_calls()) == rounds
    clock.advance(0.5)
    assert a.observe(journal.invocations.get(inv_a.id)) is not None
    assert b.observe(second_journal.invocations.get(inv_b.id)) is not None
    assert len(fake.status_calls()) == rounds + 1
    assert sorted(fake.status_calls()[-1]) == sorted(names)
    site = journal.polls.poll_site(SITE)
    assert site is not None and (site.ends_found, site.settle_due_at) == (0, None)


def test_ends_that_keep_coming_are_confirmed_by_the_cap(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    fake.settle, fake.settle_max = 0.5, 1.0
    a = engine(journal, fake, clock, "elsewhere:1:1")
    invs = [running(a, tmp_path) for _ in range(6)]
    rounds = len(fake.status_calls())
    clock.advance(0.5)
    first = clock()
    for inv in invs[:4]:  # one more end found at every probe, 0.25 s apart: never quiet
        fake.ended.add(f"vibesys-{inv.id}-1")
        assert a.observe(journal.invocations.get(inv.id)) is None
        clock.advance(0.25)
    assert len(fake.status_calls()) == rounds
    fake.ended.add(f"vibesys-{invs[4].id}-1")
    assert (
        a.observe(journal.invocations.get(invs[4].id)) is not None
    )  # 1 s after the first: the cap
    assert len(fake.status_calls()) == rounds + 1
    assert journal.polls.poll_site(SITE).started_at == first + timedelta(seconds=1)  # type: ignore[union-attr]


def test_the_floor_holds_between_rounds(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    fake.floor = 10.0
    a = engine(journal, fake, clock, "elsewhere:1:1")
    inv = running(a, tmp_path)
    make_due(journal, clock)
    assert (
        a.observe(journal.invocations.get(inv.id)) is not None
    )  # a round: the floor counts from here
    fake.ended.add(f"vibesys-{inv.id}-1")
    rounds = len(fake.status_calls())
    for _ in range(8):  # 4 s of probes that all find the marker
        clock.advance(0.5)
        a.observe(journal.invocations.get(inv.id))
    assert len(fake.status_calls()) == rounds
    clock.advance(7)  # 11 s after the last round started: past the floor
    assert a.observe(journal.invocations.get(inv.id)) is not None
    assert len(fake.status_calls()) == rounds + 1
