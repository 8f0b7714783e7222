"""The site's poller lease: a live poller keeps it, a dead one's passes at once, a frozen one's
at expiry (and its late round is refused), another host's when it expires; the journal itself
refuses a second taker and a round taken before it is due."""

from __future__ import annotations

import os
import signal
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from tests.engine.shared_poll.conftest import (
    SITE,
    Clock,
    SharedFake,
    engine,
    make_due,
    running,
    take_lease,
)
from vibesys.journal_schema import Journal, iso
from vibesys.osutil.proc import hostname, start_time


def test_a_dead_pollers_lease_passes_to_another(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    inv = running(a, tmp_path)
    live = subprocess.Popen(["sleep", "60"])
    try:
        holder = f"{hostname()}:{live.pid}:{start_time(live.pid)}"
        take_lease(journal, holder, clock)
        clock.advance(5)
        make_due(journal, clock)
        calls = len(fake.status_calls())
        # A live poller on this host keeps its lease: nobody else asks the scheduler.
        assert a.observe(journal.invocations.get(inv.id)) is None
        assert len(fake.status_calls()) == calls
        assert a.shared.pause(journal.invocations.get(inv.id), fake) == pytest.approx(0.05)
    finally:
        live.kill()
        live.wait()
    # It died in the middle of its round: the lease passes at once, expiry or not.
    assert a.observe(journal.invocations.get(inv.id)) is not None
    assert len(fake.status_calls()) == calls + 1
    site = journal.polls.poll_site(SITE)
    assert site is not None and site.poller is None


def test_a_frozen_pollers_lease_passes_on_at_expiry_and_its_late_round_is_refused(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    inv = running(a, tmp_path)
    frozen = subprocess.Popen(["sleep", "60"])
    os.kill(frozen.pid, signal.SIGSTOP)  # alive, and silent: a stall, not a death
    try:
        holder = f"{hostname()}:{frozen.pid}:{start_time(frozen.pid)}"
        with journal.write_txn() as conn:
            conn.execute(
                "UPDATE poll_sites SET poller=?, poller_expires_at=? WHERE site=?",
                (holder, iso(clock() + timedelta(minutes=2)), SITE),
            )
        make_due(journal, clock)
        calls = len(fake.status_calls())
        # Within its lease the frozen poller is waited for: nobody else asks the scheduler.
        assert a.observe(journal.invocations.get(inv.id)) is None
        assert len(fake.status_calls()) == calls
        # Past it, the round passes to another although the holder still lives.
        clock.advance(121)
        assert a.observe(journal.invocations.get(inv.id)) is not None
        assert len(fake.status_calls()) == calls + 1
        # The frozen poller wakes up and finishes its (stale) round: nothing is stored.
        rounds = journal.polls.poll_site(SITE)
        assert rounds is not None
        assert journal.polls.finish_round(SITE, holder, clock(), clock(), []) is None
        after = journal.polls.poll_site(SITE)
        assert after is not None and after.round == rounds.round
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
        frozen.kill()
        frozen.wait()


def test_an_expired_lease_of_another_host_passes_on(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    inv = running(a, tmp_path)
    take_lease(journal, "another-host:77:1", clock)
    clock.advance(5)
    make_due(journal, clock)
    assert (
        a.observe(journal.invocations.get(inv.id)) is None
    )  # its liveness is unknown: wait for expiry
    clock.advance(3600)
    make_due(journal, clock)
    assert a.observe(journal.invocations.get(inv.id)) is not None


def test_taking_the_poller_lease_is_refused_while_a_live_process_holds_it(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    # The lease itself (not only the callers' look before it): two processes that both saw
    # the lease free race for it in the journal, and only one gets it.
    a = engine(journal, fake, clock, "elsewhere:1:1")
    running(a, tmp_path)
    make_due(journal, clock)
    taken = journal.polls.take_poller(
        SITE, "elsewhere:1:1", timedelta(minutes=2), clock(), after_round=0
    )
    assert taken is not None
    assert (
        journal.polls.take_poller(
            SITE, "elsewhere:2:1", timedelta(minutes=2), clock(), after_round=0
        )
        is None
    )
    site = journal.polls.poll_site(SITE)
    assert site is not None and site.poller == "elsewhere:1:1"


def test_taking_the_poller_lease_is_refused_before_the_round_is_due(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    # The journal's own guard (not only the callers' look at due_at before it): a process
    # whose view of the schedule is stale must not run a round early; reconcile (`force`) may.
    a = engine(journal, fake, clock, "elsewhere:1:1")
    running(a, tmp_path)
    with journal.write_txn() as conn:
        conn.execute(
            "UPDATE poll_sites SET due_at=? WHERE site=?", (iso(clock() + timedelta(1)), SITE)
        )
    site = journal.polls.poll_site(SITE)
    assert site is not None
    ttl = timedelta(minutes=2)
    assert (
        journal.polls.take_poller(SITE, "elsewhere:2:1", ttl, clock(), after_round=site.round)
        is None
    )
    assert journal.polls.poll_site(SITE) == site  # nothing written
    forced = journal.polls.take_poller(
        SITE, "elsewhere:2:1", ttl, clock(), after_round=site.round, force=True
    )
    assert forced is not None
    after = journal.polls.poll_site(SITE)
    assert after is not None and after.poller == "elsewhere:2:1"
