"""Leases: one owner at a time; expiry (freezegun) and provably dead owners free an invocation."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from freezegun import freeze_time

from tests.helpers.journal import NewInvocation
from vibesys.errors import UsageError
from vibesys.journal_schema import Journal, lease_free
from vibesys.osutil import proc

# Identities on other hosts: their liveness cannot be checked, only their expiry counts.
ALICE = "otherhost:123:456"
BOB = "thirdhost:789:1011"
TTL = timedelta(seconds=30)
START = "2030-01-01 00:00:00"


def _lease(journal: Journal, invocation_id: str) -> tuple[str | None, datetime | None]:
    inv = journal.invocations.get(invocation_id)
    return inv.lease_owner, inv.lease_expires_at


def test_acquire_renew_release(journal: Journal, new_invocation: NewInvocation) -> None:
    new_invocation("inv-l")
    with freeze_time(START) as clock:
        assert journal.leases.acquire_lease("inv-l", ALICE, TTL) is True
        now = datetime.now(UTC)
        assert _lease(journal, "inv-l") == (ALICE, now + TTL)
        clock.tick(20)
        assert journal.leases.acquire_lease("inv-l", ALICE, TTL) is True  # renewal
        assert _lease(journal, "inv-l") == (ALICE, now + timedelta(seconds=20) + TTL)
        journal.leases.release_lease("inv-l", BOB)  # not the holder: nothing happens
        assert _lease(journal, "inv-l")[0] == ALICE
        journal.leases.release_lease("inv-l", ALICE)
        assert _lease(journal, "inv-l") == (None, None)
        assert journal.leases.acquire_lease("inv-l", BOB, TTL) is True


def test_another_host_waits_for_expiry_then_takes_over(
    journal: Journal, new_invocation: NewInvocation
) -> None:
    new_invocation("inv-e")
    with freeze_time(START) as clock:
        assert journal.leases.acquire_lease("inv-e", ALICE, TTL)
        held = _lease(journal, "inv-e")
        clock.tick(29)
        assert journal.leases.acquire_lease("inv-e", BOB, TTL) is False
        assert _lease(journal, "inv-e") == held, "a refused acquire writes nothing"
        clock.tick(1)  # exactly at expiry
        assert journal.leases.acquire_lease("inv-e", BOB, TTL) is True
        assert _lease(journal, "inv-e")[0] == BOB
        # The old owner is now the one refused.
        assert journal.leases.acquire_lease("inv-e", ALICE, TTL) is False
        assert _lease(journal, "inv-e")[0] == BOB


def test_renewal_keeps_another_host_out(journal: Journal, new_invocation: NewInvocation) -> None:
    new_invocation("inv-r")
    with freeze_time(START) as clock:
        assert journal.leases.acquire_lease("inv-r", ALICE, TTL)
        for _ in range(5):
            clock.tick(20)
            assert journal.leases.acquire_lease("inv-r", ALICE, TTL)
            assert not journal.leases.acquire_lease("inv-r", BOB, TTL)
        clock.tick(31)
        assert journal.leases.acquire_lease("inv-r", BOB, TTL)


def test_a_lease_taken_at_creation(journal: Journal, new_invocation: NewInvocation) -> None:
    with freeze_time(START):
        inv = new_invocation("inv-c", lease_owner=ALICE, now=None, lease_ttl=TTL)
        assert inv.lease_owner == ALICE
        assert inv.lease_expires_at == datetime.now(UTC) + TTL
        assert not journal.leases.acquire_lease("inv-c", BOB, TTL)


@pytest.fixture
def dead_identity() -> str:
    """The identity of a process on this host that has exited."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    started = proc.start_time(child.pid)
    assert started is not None
    identity = f"{proc.hostname()}:{child.pid}:{started}"
    assert proc.identity_alive(identity) is True
    assert child.stdin is not None
    child.stdin.close()
    child.wait(timeout=30)
    assert proc.identity_alive(identity) is False
    return identity


def test_a_dead_owner_on_this_host_is_taken_over_at_once(
    journal: Journal, new_invocation: NewInvocation, dead_identity: str
) -> None:
    new_invocation("inv-d")
    with freeze_time(START):
        assert journal.leases.acquire_lease("inv-d", dead_identity, timedelta(hours=1))
        assert journal.leases.acquire_lease("inv-d", ALICE, TTL) is True
        assert _lease(journal, "inv-d")[0] == ALICE


def test_a_live_owner_on_this_host_keeps_its_lease(
    journal: Journal, new_invocation: NewInvocation
) -> None:
    new_invocation("inv-live")
    me = proc.self_identity()
    with freeze_time(START):
        assert journal.leases.acquire_lease("inv-live", me, TTL)
        assert journal.leases.acquire_lease("inv-live", ALICE, TTL) is False


def test_a_reused_pid_is_not_the_owner(journal: Journal, new_invocation: NewInvocation) -> None:
    # Our own pid with another start time: a different process that is gone.
    new_invocation("inv-pid")
    impostor = f"{proc.hostname()}:{os.getpid()}:1"
    assert proc.identity_alive(impostor) is False
    with freeze_time(START):
        assert journal.leases.acquire_lease("inv-pid", impostor, timedelta(hours=1))
        assert journal.leases.acquire_lease("inv-pid", ALICE, TTL) is True


def test_acquire_of_an_unknown_invocation(journal: Journal) -> None:
    with pytest.raises(UsageError, match="unknown invocation ghost"):
        journal.leases.acquire_lease("ghost", ALICE, TTL)


NOW = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("holder", "expires", "owner", "free"),
    [
        (None, None, ALICE, True),  # nobody holds it
        (ALICE, NOW + TTL, ALICE, True),  # its own
        (ALICE, NOW + TTL, BOB, False),  # held, unexpired, liveness unknown
        (ALICE, NOW, BOB, True),  # expires now
        (ALICE, NOW - TTL, BOB, True),  # expired
        (ALICE, None, BOB, True),  # no expiry recorded
    ],
)
def test_lease_free(holder: str | None, expires: datetime | None, owner: str, free: bool) -> None:
    assert lease_free(holder, expires, owner, NOW) is free


def test_a_live_owner_on_this_host_keeps_its_lease_past_expiry(
    journal: Journal, new_invocation: NewInvocation
) -> None:
    """A live `vibesys run` blocked in a slow submit must not be taken over: the taker's
    lookup could come before the scheduler knows the job and submit it a second time."""
    inv = new_invocation()
    me = proc.self_identity()
    with freeze_time(NOW) as clock:
        assert journal.leases.acquire_lease(inv.id, me, TTL)
        clock.tick(TTL.total_seconds() * 10)
        assert not journal.leases.acquire_lease(inv.id, "otherhost:1:1", TTL)
        assert not lease_free(me, NOW, "otherhost:1:1", NOW + TTL * 10)


def test_a_bulk_acquire_takes_only_the_free_leases(
    journal: Journal, new_invocation: NewInvocation, dead_identity: str
) -> None:
    """One reconcile round takes, in one transaction, every lease nobody else may hold."""
    for ident in ("inv-free", "inv-mine", "inv-alice", "inv-dead", "inv-live", "inv-expired"):
        new_invocation(ident)
    me = proc.self_identity()
    with freeze_time(START) as clock:
        assert journal.leases.acquire_lease("inv-mine", BOB, TTL)
        assert journal.leases.acquire_lease("inv-alice", ALICE, TTL)
        assert journal.leases.acquire_lease("inv-dead", dead_identity, timedelta(hours=1))
        assert journal.leases.acquire_lease("inv-live", me, TTL)
        assert journal.leases.acquire_lease("inv-expired", ALICE, timedelta(seconds=5))
        clock.tick(10)
        now = datetime.now(UTC)
        ids = ["inv-free", "inv-mine", "inv-alice", "inv-dead", "inv-live", "inv-expired"]
        taken = journal.leases.acquire_leases(ids, BOB, TTL)
        assert taken == {"inv-free", "inv-mine", "inv-dead", "inv-expired"}
        for ident in sorted(taken):
            assert _lease(journal, ident) == (BOB, now + TTL), ident
        assert _lease(journal, "inv-alice")[0] == ALICE
        assert _lease(journal, "inv-live")[0] == me
        # What was taken in bulk holds like any lease: refused to others until it expires.
        assert journal.leases.acquire_leases(ids, ALICE, TTL) == {"inv-alice"}
        clock.tick(TTL.total_seconds())
        assert journal.leases.acquire_leases(["inv-free"], ALICE, TTL) == {"inv-free"}


def test_a_bulk_release_drops_only_the_callers_leases(
    journal: Journal, new_invocation: NewInvocation
) -> None:
    for ident in ("inv-a", "inv-b"):
        new_invocation(ident)
    with freeze_time(START):
        assert journal.leases.acquire_leases(["inv-a"], ALICE, TTL) == {"inv-a"}
        assert journal.leases.acquire_leases(["inv-b"], BOB, TTL) == {"inv-b"}
        journal.leases.release_leases(["inv-a", "inv-b"], BOB)
        assert _lease(journal, "inv-a")[0] == ALICE
        assert _lease(journal, "inv-b") == (None, None)
