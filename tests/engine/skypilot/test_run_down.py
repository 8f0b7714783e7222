"""`run --down` on SkyPilot: the campaign's cluster is released with its last evaluation, once,
by whoever ends it, never while another evaluation still needs it; a frozen control plane keeps
the outcome and leaves the release to reconcile."""

from __future__ import annotations

import json
from pathlib import Path

from tests.engine.skypilot.conftest import engine_on, run
from tests.helpers.skyfake import FakeSky
from vibesys.adapters.skypilot.request import SkyPilotRequest
from vibesys.engine import DriveOptions, Engine, RetryPolicy, drive, reconcile
from vibesys.journal_schema import LeaseState, open_journal
from vibesys.states import JobState, Outcome


def test_run_down_releases_the_cluster_with_the_campaigns_last_evaluation(
    fake: FakeSky, tmp_path: Path
) -> None:
    engine = engine_on(fake, tmp_path)
    first = run(engine, fake.request(), ["true"], tmp_path)
    [lease] = engine.journal.clusters.cluster_leases()
    assert lease.state is LeaseState.UP and fake.calls("down") == []
    last = run(engine, fake.request(down=True), ["sh", "-c", "exit 3"], tmp_path)
    assert (first.outcome, last.outcome) == (Outcome.COMPLETED, Outcome.APPLICATION_FAILED)
    lease = engine.journal.clusters.cluster_lease(lease.id)
    assert lease.state is LeaseState.RELEASED, lease.evidence
    assert f"run --down: invocation {last.id} is done" in json.dumps(lease.evidence)
    assert len(fake.calls("down")) == 1
    assert "released cluster" in engine.notes[last.id]
    # Nothing is left for reconcile to do.
    assert reconcile(engine_on(fake, tmp_path, owner="host:2:2")) == []
    assert len(fake.calls("down")) == 1


def test_run_down_leaves_a_cluster_that_another_evaluation_still_needs(
    fake: FakeSky, tmp_path: Path
) -> None:
    engine = engine_on(fake, tmp_path)
    request = fake.request(down=True)
    inv = engine.prepare(
        adapter="skypilot", command=["sleep", "30"], request=request, run_root=tmp_path / "runs"
    )
    running = drive(engine, inv, DriveOptions(detach=True))
    assert running.state is JobState.RUNNING
    # The evaluation that asked for --down still runs there: the cluster stays.
    [lease] = engine.journal.clusters.cluster_leases()
    assert release_finished_campaigns_of(engine) == []
    assert engine.journal.clusters.cluster_lease(lease.id).state is LeaseState.UP
    assert fake.calls("down") == []


def release_finished_campaigns_of(engine: Engine) -> list[str]:
    from vibesys.engine.clusters import release_finished_campaigns

    return [lease.name for lease in release_finished_campaigns(engine)]


def test_a_down_is_carried_out_by_whoever_ends_the_evaluation(
    fake: FakeSky, tmp_path: Path
) -> None:
    """`--down` is recorded with the request: a follower (`wait`) that carries the evaluation
    to its end, nobody else driving it, releases the cluster as the run would have; reconcile
    then has nothing left to release."""
    engine = engine_on(fake, tmp_path)
    inv = engine.prepare(
        adapter="skypilot", command=["true"], request=fake.request(down=True), run_root=tmp_path
    )
    done = drive(engine, inv, DriveOptions(owner=False))
    assert done.state is JobState.DONE
    [lease] = engine.journal.clusters.cluster_leases()
    assert engine.journal.clusters.cluster_lease(lease.id).state is LeaseState.RELEASED
    assert reconcile(engine_on(fake, tmp_path, owner="host:2:2")) == []
    assert len(fake.calls("down")) == 1


def test_run_down_against_a_frozen_control_plane_keeps_the_outcome_and_reconcile_releases(
    fake: FakeSky, tmp_path: Path
) -> None:
    def build(adapter: str, request: SkyPilotRequest) -> object:
        backend = fake.registry_backend(request)
        backend.ops.launch_timeout = 5.0  # how long `sky launch`/`sky down` may take here
        return backend

    engine = Engine(
        open_journal(tmp_path / "journal.db"),
        build,  # type: ignore[arg-type]
        retry=RetryPolicy(max_retries=2, initial_delay_seconds=0.0),
        owner="host:1:1",
    )
    fake.control("fake-stall-down", "30")  # the next `sky down` hangs: a stall, not an error
    inv = run(engine, fake.request(down=True), ["true"], tmp_path)
    assert (inv.state, inv.outcome) == (JobState.DONE, Outcome.COMPLETED)  # the outcome stands
    assert "not released" in engine.notes[inv.id]
    [lease] = engine.journal.clusters.cluster_leases()
    assert lease.state is LeaseState.RELEASING  # the intent is recorded; the effect is unproven
    assert fake.cluster_state(lease.name) is not None  # and the cluster is still there
    rows = reconcile(engine)
    assert [(r.invocation_id, r.after) for r in rows] == [
        (f"cluster {lease.name}", LeaseState.RELEASED)
    ]
    assert fake.cluster_state(lease.name) is None
    assert len(fake.calls("down")) == 2


def test_run_down_after_a_retry_on_the_same_cluster_releases_it_once(
    fake: FakeSky, tmp_path: Path
) -> None:
    engine = engine_on(fake, tmp_path)
    fake.control("fake-fail-exec", "1")  # attempt 1 fails before anything runs: retried there
    inv = run(engine, fake.request(down=True), ["true"], tmp_path)
    assert (inv.outcome, inv.attempt) == (Outcome.COMPLETED, 2)
    [lease] = engine.journal.clusters.cluster_leases()
    assert [a for a, _ in engine.journal.clusters.leases_used_by(inv.id)] == [1, 2]
    assert engine.journal.clusters.cluster_lease(lease.id).state is LeaseState.RELEASED
    assert engine.notes[inv.id] == f"released cluster {lease.name} (run --down)"
    assert len(fake.calls("down")) == 1
