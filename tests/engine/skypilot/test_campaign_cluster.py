"""The SkyPilot adapter through the engine: the campaign's cluster is launched once, reused (an
outside one too, if compatible), replaced when its allocation ends and released once (never
under a running invocation), each step recorded in the cluster lease table intent first;
attempts record where they ran, and journal show names the cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine.skypilot.conftest import engine_on, job_claims, run
from tests.helpers.skyfake import FakeSky
from vibesys.cli.render import show
from vibesys.engine import DriveOptions, drive
from vibesys.engine.clusters import release_cluster
from vibesys.errors import UsageError
from vibesys.journal_schema import LeaseState, verify_journal
from vibesys.states import FailureClass, JobState, Outcome


def test_launch_once_execute_twice_release_once(fake: FakeSky, tmp_path: Path) -> None:
    engine = engine_on(fake, tmp_path)
    request = fake.request()
    ok = run(engine, request, ["sh", "-c", "echo fine"], tmp_path)
    bad = run(engine, request, ["sh", "-c", "echo broken >&2; exit 3"], tmp_path)
    assert (ok.outcome, ok.exit_code) == (Outcome.COMPLETED, 0)
    assert (bad.outcome, bad.exit_code) == (Outcome.APPLICATION_FAILED, 3)
    [lease] = engine.journal.clusters.cluster_leases()
    assert (lease.state, lease.allocation_job, lease.profile) == (LeaseState.UP, "200", "test")
    assert [e["state"] for e in lease.evidence] == ["launching", "up"]
    assert engine.journal.clusters.lease_users(lease.id) == [(ok.id, 1), (bad.id, 1)]
    for inv, sky_id in ((ok, "1"), (bad, "2")):
        [attempt] = engine.journal.invocations.attempts(inv.id)
        assert attempt.job_id == f"{sky_id}@200"
        assert attempt.provenance["allocation_job_id"] == "200"
        assert attempt.provenance["sky_job_id"] == sky_id
        assert attempt.provenance["cluster"] == lease.name
        assert attempt.provenance["profile"] == "test" and attempt.provenance["ended_at"]

    released = release_cluster(engine, lease.id, "campaign over")
    assert released.state is LeaseState.RELEASED and released.released_at
    with pytest.raises(UsageError, match="not live"):
        release_cluster(engine, lease.id, "again")
    assert len(fake.calls("launch")) == 1
    assert len(fake.calls("exec")) == 2
    assert len(fake.calls("down")) == 1
    assert fake.cluster_state(lease.name) is None
    assert verify_journal(engine.journal) == []


def test_reuses_a_compatible_cluster_it_did_not_launch(fake: FakeSky, tmp_path: Path) -> None:
    outside = fake.backend().ensure_lease()  # launched by another journal, or by hand
    engine = engine_on(fake, tmp_path)
    inv = run(engine, fake.request(), ["true"], tmp_path)
    assert inv.outcome is Outcome.COMPLETED
    [lease] = engine.journal.clusters.cluster_leases()
    assert lease.state is LeaseState.UP and lease.allocation_job == outside.allocation[0]
    assert "adopted" in lease.evidence[0]["text"]
    assert len(fake.calls("launch")) == 1  # the outside one


def test_rejects_an_incompatible_cluster_and_leaves_it_alone(fake: FakeSky, tmp_path: Path) -> None:
    other = fake.backend(cpus_per_node=4)
    other.cluster = fake.backend().cluster  # someone holds our name with another shape
    other.ensure_lease()
    engine = engine_on(fake, tmp_path)
    inv = run(engine, fake.request(), ["true"], tmp_path)
    assert (inv.state, inv.outcome) == (JobState.DONE, Outcome.REJECTED)
    reason = engine.journal.invocations.history(inv.id)[-1].evidence["reason"]
    assert "4 CPUs per node (wanted 1)" in reason
    assert engine.journal.clusters.cluster_leases() == []
    assert len(fake.calls("launch")) == 1 and fake.calls("down") == [] and job_claims(fake) == []
    assert fake.cluster_state(other.cluster) is not None


@pytest.mark.parametrize("how", ["the job dies", "the command is signalled"])
def test_an_expired_allocation_is_replaced_and_the_attempt_retried(
    fake: FakeSky, tmp_path: Path, how: str
) -> None:
    """Either way the allocation's end is the infrastructure's: when the wrapper outlives its
    command, it records 143, which is not the command's failure (seen live on Slurm)."""
    engine = engine_on(fake, tmp_path)
    inv = engine.prepare(
        adapter="skypilot",
        # The first attempt runs until its allocation is lost; the second ends at once.
        command=["sh", "-c", 'case "$PWD" in */2/work) exit 0 ;; esac; sleep 30'],
        request=fake.request(),
        run_root=tmp_path / "runs",
    )
    inv = drive(engine, inv, DriveOptions(detach=True))
    while not job_claims(fake):
        engine.advance(inv)
    first = engine.journal.clusters.cluster_leases()[0]
    # scancel of the allocation holding the cluster
    fake.control("fake-lose", first.name, *(["--signal-command"] if "signalled" in how else []))
    inv = drive(engine, engine.journal.invocations.get(inv.id), DriveOptions())
    assert (inv.outcome, inv.attempt) == (Outcome.COMPLETED, 2)
    attempts = engine.journal.invocations.attempts(inv.id)
    assert attempts[0].failure_class is FailureClass.ALLOCATION_EXPIRED
    old, new = engine.journal.clusters.cluster_leases()
    assert (old.id, old.state, old.allocation_job) == (first.id, LeaseState.LOST, "200")
    assert (new.state, new.allocation_job) == (LeaseState.UP, "201")
    assert [a.provenance["allocation_job_id"] for a in attempts] == ["200", "201"]
    assert engine.journal.clusters.leases_used_by(inv.id) == [(1, old), (2, new)]
    assert len(fake.calls("launch")) == 2


def test_a_release_waits_for_the_invocations_on_the_cluster(fake: FakeSky, tmp_path: Path) -> None:
    engine = engine_on(fake, tmp_path)
    inv = engine.prepare(
        adapter="skypilot", command=["sleep", "60"], request=fake.request(), run_root=tmp_path
    )
    inv = drive(engine, inv, DriveOptions(detach=True))
    [lease] = engine.journal.clusters.cluster_leases()
    with pytest.raises(UsageError, match=f"still serves invocation.* {inv.id}"):
        release_cluster(engine, lease.id, "too early")
    assert engine.journal.clusters.cluster_lease(lease.id).state is LeaseState.UP
    assert fake.calls("down") == []


def test_journal_show_names_the_cluster_an_attempt_ran_on(fake: FakeSky, tmp_path: Path) -> None:
    engine = engine_on(fake, tmp_path)
    inv = run(engine, fake.request(), ["true"], tmp_path)
    journal = engine.journal
    leases = journal.clusters.leases_used_by(inv.id)
    text = show(
        inv, journal.invocations.attempts(inv.id), journal.invocations.history(inv.id), (), leases
    )
    [lease] = journal.clusters.cluster_leases()
    assert f"     cluster {lease.name}  lease {lease.id}  up  allocation 200  profile test" in text
    assert "ran on  " in text and "allocation_job_id=200" in text
    assert json.loads(json.dumps([lease.to_json()]))[0]["state"] == "up"
