"""The journal's side of a site's schedule (journal_schema/polls.py): what a probe leaves when
it gives the poller lease back, and when the next round may be taken."""

from __future__ import annotations

from datetime import timedelta

from tests.engine.shared_poll.conftest import SITE, Clock
from vibesys.journal_schema import Journal
from vibesys.journal_schema.polls import Settle

A, B = "elsewhere:1:1", "elsewhere:2:1"
TTL = timedelta(seconds=1)


def probe(journal: Journal, owner: str, clock: Clock) -> None:
    assert (
        journal.polls.take_poller(SITE, owner, TTL, clock(), after_round=0, probe=True) is not None
    )


def test_a_probe_never_puts_off_a_round_due_sooner(journal: Journal, clock: Clock) -> None:
    journal.polls.record_site_facts(SITE, {})
    start = clock()
    journal.polls.advance_due(SITE, start + timedelta(seconds=1))  # a cancel asked for a round
    probe(journal, A, clock)
    journal.polls.release_poller(SITE, A, probed_at=clock(), due_at=start + timedelta(seconds=5))
    assert journal.polls.poll_site(SITE).due_at == start + timedelta(seconds=1)  # type: ignore[union-attr]
    probe(journal, A, clock)
    journal.polls.release_poller(SITE, A, due_at=start + timedelta(seconds=0.5))
    assert journal.polls.poll_site(SITE).due_at == start + timedelta(seconds=0.5)  # type: ignore[union-attr]


def test_ends_settle_apart_from_the_schedule_and_only_from_the_lease_holder(
    journal: Journal, clock: Clock
) -> None:
    journal.polls.record_site_facts(SITE, {})
    start = clock()
    journal.polls.advance_due(SITE, start + timedelta(seconds=10))
    probe(journal, A, clock)
    clock.advance(2)  # A's lease expires, B probes: A's late release writes nothing
    probe(journal, B, clock)
    journal.polls.release_poller(SITE, A, settle=Settle(3, start, start + timedelta(seconds=2.5)))
    assert journal.polls.poll_site(SITE).settle_due_at is None  # type: ignore[union-attr]
    journal.polls.release_poller(SITE, B, settle=Settle(1, clock(), clock() + timedelta(seconds=1)))
    site = journal.polls.poll_site(SITE)
    assert site is not None and (site.ends_found, site.ends_first_at) == (1, clock())
    assert site.due_at == start + timedelta(seconds=10)  # the schedule's own round is kept
    assert site.next_due() == clock() + timedelta(seconds=1)
    clock.advance(0.5)
    assert journal.polls.take_poller(SITE, A, TTL, clock(), after_round=0) is None  # not yet due
    clock.advance(0.5)
    assert journal.polls.take_poller(SITE, A, TTL, clock(), after_round=0) is not None
