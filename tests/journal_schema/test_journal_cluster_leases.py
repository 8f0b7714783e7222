"""A cluster lease's times: datetimes (aware, UTC) once read, the same ISO text as before in
the table and in every JSON form."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from vibesys.cli.render import clusters_table
from vibesys.journal_schema import Journal, LeaseState
from vibesys.journal_schema.cluster_rows import EFFECT_TTL

LAUNCH = datetime(2030, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
UP = LAUNCH + timedelta(seconds=7)
DOWN = LAUNCH + timedelta(minutes=3)
GONE = DOWN + timedelta(microseconds=1)


def _launch(journal: Journal) -> int:
    lease = journal.clusters.intend_launch(
        name="vibesys-c-1",
        campaign="c",
        fingerprint="1",
        profile="p",
        adapter="skypilot",
        request={"run_id": "c"},
        reason="first use",
        owner="host:1:1",
        now=LAUNCH,
    )
    return lease.id


def _stored(journal: Journal, lease_id: int) -> tuple[str | None, ...]:
    row = journal.conn.execute(
        "SELECT owner_expires_at, intended_at, launched_at, release_intended_at, released_at, "
        "updated_at FROM cluster_leases WHERE id=?",
        (lease_id,),
    ).fetchone()
    return tuple(row)


def test_a_lease_read_back_holds_the_datetimes_written(journal: Journal) -> None:
    lease_id = _launch(journal)
    launching = journal.clusters.cluster_lease(lease_id)
    assert launching.intended_at == launching.updated_at == LAUNCH
    assert launching.owner_expires_at == LAUNCH + EFFECT_TTL
    assert launching.launched_at is None and launching.released_at is None
    assert _stored(journal, lease_id) == (
        "2030-01-02T04:04:05.123456+00:00",
        "2030-01-02T03:04:05.123456+00:00",
        None,
        None,
        None,
        "2030-01-02T03:04:05.123456+00:00",
    )

    journal.clusters.record_launched(lease_id, ["981"], "sky launch: up", now=UP)
    journal.clusters.intend_release(lease_id, "host:1:1", "done", now=DOWN)
    journal.clusters.record_released(lease_id, "sky down: gone", now=GONE)
    lease = journal.clusters.cluster_lease(lease_id)
    assert lease.state is LeaseState.RELEASED
    assert (lease.intended_at, lease.launched_at, lease.release_intended_at) == (LAUNCH, UP, DOWN)
    assert lease.released_at == lease.updated_at == GONE and lease.owner_expires_at is None
    for at in (lease.intended_at, lease.launched_at, lease.release_intended_at):
        assert at is not None and at.utcoffset() == timedelta(0)
    assert [step["at"] for step in lease.evidence] == [
        "2030-01-02T03:04:05.123456+00:00",
        "2030-01-02T03:04:12.123456+00:00",
        "2030-01-02T03:07:05.123456+00:00",
        "2030-01-02T03:07:05.123457+00:00",
    ]
    shown = lease.to_json()
    assert {name: shown[name] for name in shown if name.endswith("_at")} == {
        "intended_at": "2030-01-02T03:04:05.123456+00:00",
        "launched_at": "2030-01-02T03:04:12.123456+00:00",
        "release_intended_at": "2030-01-02T03:07:05.123456+00:00",
        "released_at": "2030-01-02T03:07:05.123457+00:00",
        "updated_at": "2030-01-02T03:07:05.123457+00:00",
    }
    json.dumps(shown)  # nothing in it but JSON
    assert _stored(journal, lease_id)[1:] == tuple(
        shown[name]
        for name in (
            "intended_at",
            "launched_at",
            "release_intended_at",
            "released_at",
            "updated_at",
        )
    )
    assert clusters_table([lease]).splitlines()[1].endswith("  2030-01-02T03:07:05.123457+00:00")


def test_a_time_stored_without_a_zone_reads_as_utc(journal: Journal) -> None:
    lease_id = _launch(journal)
    journal.conn.execute(
        "UPDATE cluster_leases SET launched_at='2030-01-02T03:04:05' WHERE id=?", (lease_id,)
    )
    launched = journal.clusters.cluster_lease(lease_id).launched_at
    assert launched == datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert journal.clusters.cluster_lease(lease_id).to_json()["launched_at"] == (
        "2030-01-02T03:04:05.000000+00:00"
    )


def test_a_launched_and_an_adopted_lease_keep_who_they_are_field_by_field(
    journal: Journal,
) -> None:
    """Both new rows are written by one function that takes the lease's identity in order:
    every field must land in its own column (two of them swapped would still type-check)."""
    who = {
        "campaign": "camp",
        "fingerprint": "fp",
        "profile": "prof",
        "adapter": "skypilot",
        "request": {"run_id": "camp"},
        "site_digest": "digest",
    }
    launched = journal.clusters.intend_launch(
        name="vibesys-a", reason="first use", owner="host:1:1", now=LAUNCH, **who
    )
    adopted = journal.clusters.record_reuse(
        name="vibesys-b", allocation=["7"], evidence="sky status", now=UP, **who
    )
    for lease, name in ((launched, "vibesys-a"), (adopted, "vibesys-b")):
        got = {key: getattr(lease, key) for key in who}
        assert (lease.name, got) == (name, who)
    assert (launched.state, adopted.state) == (LeaseState.LAUNCHING, LeaseState.UP)
    assert (launched.intended_at, adopted.intended_at, adopted.launched_at) == (LAUNCH, UP, UP)
    assert adopted.allocation_job == "7" and launched.owner == "host:1:1"
