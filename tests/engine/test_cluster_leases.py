"""Cluster leases: the journal's rules (one live row per cluster, what a launch or a reuse does
to the rows there are) and reconcile's settlement of a launch or release a crash interrupted,
against the fake `sky`."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.skyfake import FakeSky, make_fake_sky
from vibesys.engine import Engine, reconcile
from vibesys.engine.clusters import settle_leases
from vibesys.journal_schema import Journal, LeaseState, open_journal
from vibesys.osutil.proc import self_identity

DEAD = "host:1:1"  # the engine's own identity: a crashed process with it is provably gone


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeSky]:
    sky = make_fake_sky(tmp_path)
    yield sky
    sky.stop_jobs()


@pytest.fixture
def engine(fake: FakeSky, tmp_path: Path) -> Iterator[Engine]:
    on = Engine(
        open_journal(tmp_path / "journal.db"),
        lambda adapter, request: fake.registry_backend(request),  # type: ignore[arg-type]
        owner=DEAD,
    )
    yield on
    on.journal.close()


def facts(fake: FakeSky) -> dict[str, Any]:
    backend = fake.backend()
    return {
        "name": backend.cluster,
        "campaign": "campaign-1",
        "fingerprint": backend.fingerprint,
        "profile": "test",
        "adapter": "skypilot",
        "request": fake.request().recorded(),
    }


def launching(journal: Journal, fake: FakeSky, owner: str = DEAD) -> int:
    return journal.clusters.intend_launch(**facts(fake), reason="test", owner=owner).id


def test_an_interrupted_launch_that_left_no_cluster_failed(engine: Engine, fake: FakeSky) -> None:
    lease = launching(engine.journal, fake)
    [row] = settle_leases(engine)
    assert (row.lease_id, row.before, row.after) == (lease, "launching", "failed")
    assert "left no cluster" in row.evidence
    assert settle_leases(engine) == []  # settled once; nothing left to do


def test_an_interrupted_launch_that_left_the_cluster_up_is_recorded(
    engine: Engine, fake: FakeSky
) -> None:
    lease = launching(engine.journal, fake)
    fake.backend().ensure_lease()  # the launch went through before the crash
    rows = reconcile(engine)
    assert [(r.invocation_id, r.before, r.after) for r in rows] == [
        (f"cluster {fake.backend().cluster}", "launching", "up")
    ]
    up = engine.journal.clusters.cluster_lease(lease)
    assert (up.state, up.allocation_job, up.owner) == (LeaseState.UP, "200", None)


def test_a_launch_still_under_way_in_the_control_plane_is_left_launching(
    engine: Engine, fake: FakeSky
) -> None:
    lease = launching(engine.journal, fake)
    fake.control("fake-inflight", "1")
    [row] = settle_leases(engine)
    assert row.after == "launching" and "still active" in row.evidence
    assert engine.journal.clusters.cluster_lease(lease).state is LeaseState.LAUNCHING


def test_a_live_owner_is_left_alone(engine: Engine, fake: FakeSky) -> None:
    launching(engine.journal, fake, owner=self_identity())  # this very process: alive
    assert settle_leases(engine) == []


@pytest.mark.parametrize("cluster_left", [True, False])
def test_an_interrupted_release_is_finished(
    engine: Engine, fake: FakeSky, cluster_left: bool
) -> None:
    receipt = fake.backend().ensure_lease()
    lease = engine.journal.clusters.record_reuse(
        **facts(fake), allocation=receipt.allocation, evidence="found"
    )
    engine.journal.clusters.intend_release(lease.id, DEAD, "campaign over")
    if not cluster_left:
        fake.backend().release()
    downs = len(fake.calls("down"))
    [row] = settle_leases(engine)
    assert (row.before, row.after) == ("releasing", "released")
    assert len(fake.calls("down")) == downs + (1 if cluster_left else 0)
    assert fake.cluster_state(lease.name) is None


def test_one_live_lease_per_cluster(engine: Engine, fake: FakeSky) -> None:
    journal = engine.journal
    first = launching(journal, fake)
    assert launching(journal, fake) == first  # a launch continues the launch under way
    journal.clusters.record_launched(first, ["200"], "up")
    # A launch wanted while the row says up: a refresh found the cluster gone.
    second = launching(journal, fake)
    assert second != first
    assert journal.clusters.cluster_lease(first).state is LeaseState.LOST
    with pytest.raises(sqlite3.IntegrityError), journal.write_txn() as conn:
        conn.execute("UPDATE cluster_leases SET state='up' WHERE id=?", (first,))


def test_a_reuse_adopts_or_follows_a_relaunch(engine: Engine, fake: FakeSky) -> None:
    journal = engine.journal
    adopted = journal.clusters.record_reuse(**facts(fake), allocation=["300"], evidence="found")
    assert adopted.state is LeaseState.UP and "adopted" in adopted.evidence[0]["text"]
    same = journal.clusters.record_reuse(**facts(fake), allocation=["300"], evidence="found")
    assert same.id == adopted.id and len(same.evidence) == 1  # nothing new: nothing written
    moved = journal.clusters.record_reuse(**facts(fake), allocation=["301"], evidence="found")
    assert moved.id != adopted.id and moved.allocation_job == "301"
    assert journal.clusters.cluster_lease(adopted.id).state is LeaseState.LOST


def test_a_launch_or_release_a_live_process_carries_out_is_not_taken_over(
    engine: Engine, fake: FakeSky
) -> None:
    from vibesys.errors import StaleState

    journal = engine.journal
    lease = launching(journal, fake, owner=self_identity())  # this live process launches it
    with pytest.raises(StaleState, match="by live"):
        launching(journal, fake, owner="host:2:2")
    assert journal.clusters.cluster_lease(lease).owner == self_identity()
    # Its own retry continues it.
    assert launching(journal, fake, owner=self_identity()) == lease


def test_no_attempt_joins_a_lease_on_its_way_down_and_no_release_cuts_one_short(
    engine: Engine, fake: FakeSky, tmp_path: Path
) -> None:
    from vibesys.errors import StaleState, UsageError

    journal = engine.journal
    lease = journal.clusters.record_launched(launching(journal, fake), ("200",), "up")
    inv = engine.prepare(
        adapter="skypilot", command=["true"], request=fake.request(), run_root=tmp_path
    )
    journal.clusters.record_lease_use(lease.id, inv.id, 1)
    # The check is the journal's, in the release's own transaction: an unfinished user refuses.
    with pytest.raises(UsageError, match=f"still serves invocation.*{inv.id}"):
        journal.clusters.intend_release(lease.id, DEAD, "too early")
    assert journal.clusters.cluster_lease(lease.id).state is LeaseState.UP
    with journal.write_txn() as conn:  # the evaluation ended
        conn.execute("UPDATE invocations SET state='DONE' WHERE id=?", (inv.id,))
    journal.clusters.intend_release(lease.id, DEAD, "campaign over")
    other = engine.prepare(
        adapter="skypilot", command=["true"], request=fake.request(), run_root=tmp_path
    )
    with pytest.raises(StaleState, match="releasing"):
        journal.clusters.record_lease_use(lease.id, other.id, 1)
    assert journal.clusters.lease_users(lease.id) == [(inv.id, 1)]
