"""The SkyPilot adapter through the engine, against the scripted fake `sky` (its outputs copy the
real ones; jobs really run): the campaign's cluster is launched once, reused, replaced when its
allocation ends and released once, each step recorded in the cluster lease table intent first;
attempts record where they ran."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.skyfake import FakeSky, make_fake_sky
from vibesys.adapters.skypilot.request import SkyPilotRequest
from vibesys.cli.render import show
from vibesys.engine import DriveOptions, Engine, RetryPolicy, drive, reconcile
from vibesys.engine.clusters import release_cluster
from vibesys.engine.seen import Sight
from vibesys.errors import UsageError
from vibesys.journal_schema import Invocation, LeaseState, open_journal, verify_journal
from vibesys.states import FailureClass, JobState, Outcome


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeSky]:
    sky = make_fake_sky(tmp_path)
    yield sky
    sky.stop_jobs()


def engine_on(fake: FakeSky, tmp_path: Path, owner: str = "host:1:1") -> Engine:
    return Engine(
        open_journal(tmp_path / "journal.db"),
        lambda adapter, request: fake.registry_backend(request),  # type: ignore[arg-type]
        retry=RetryPolicy(max_retries=2, initial_delay_seconds=0.0),
        owner=owner,
    )


def run(engine: Engine, request: SkyPilotRequest, command: list[str], tmp_path: Path) -> Invocation:
    inv = engine.prepare(
        adapter="skypilot", command=command, request=request, run_root=tmp_path / "runs"
    )
    return drive(engine, inv, DriveOptions())


def job_claims(fake: FakeSky) -> list[str]:
    """Attempts whose command started (their run directory holds the job's own claim)."""
    return sorted(
        str(path.parent.relative_to(fake.remote))
        for path in fake.remote.glob("*/*/claim")
        if path.read_text().startswith("kind=job")
    )


def test_launch_once_execute_twice_release_once(fake: FakeSky, tmp_path: Path) -> None:
    engine = engine_on(fake, tmp_path)
    request = fake.request()
    ok = run(engine, request, ["sh", "-c", "echo fine"], tmp_path)
    bad = run(engine, request, ["sh", "-c", "echo broken >&2; exit 3"], tmp_path)
    assert (ok.outcome, ok.exit_code) == (Outcome.COMPLETED, 0)
    assert (bad.outcome, bad.exit_code) == (Outcome.APPLICATION_FAILED, 3)
    [lease] = engine.journal.cluster_leases()
    assert (lease.state, lease.allocation_job, lease.profile) == (LeaseState.UP, "200", "test")
    assert [e["state"] for e in lease.evidence] == ["launching", "up"]
    assert engine.journal.lease_users(lease.id) == [(ok.id, 1), (bad.id, 1)]
    for inv, sky_id in ((ok, "1"), (bad, "2")):
        [attempt] = engine.journal.attempts(inv.id)
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
    [lease] = engine.journal.cluster_leases()
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
    reason = engine.journal.history(inv.id)[-1].evidence["reason"]
    assert "4 CPUs per node (wanted 1)" in reason
    assert engine.journal.cluster_leases() == []
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
    first = engine.journal.cluster_leases()[0]
    # scancel of the allocation holding the cluster
    fake.control("fake-lose", first.name, *(["--signal-command"] if "signalled" in how else []))
    inv = drive(engine, engine.journal.get(inv.id), DriveOptions())
    assert (inv.outcome, inv.attempt) == (Outcome.COMPLETED, 2)
    attempts = engine.journal.attempts(inv.id)
    assert attempts[0].failure_class is FailureClass.ALLOCATION_EXPIRED
    old, new = engine.journal.cluster_leases()
    assert (old.id, old.state, old.allocation_job) == (first.id, LeaseState.LOST, "200")
    assert (new.state, new.allocation_job) == (LeaseState.UP, "201")
    assert [a.provenance["allocation_job_id"] for a in attempts] == ["200", "201"]
    assert engine.journal.leases_used_by(inv.id) == [(1, old), (2, new)]
    assert len(fake.calls("launch")) == 2


def test_logs_and_artifacts_come_home(fake: FakeSky, tmp_path: Path) -> None:
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    (candidate / "bench.sh").write_text("echo result line\nmkdir out\necho 42 > out/score\n")
    engine = engine_on(fake, tmp_path)
    request = fake.request(workdir=str(candidate), artifacts=["out/*"])
    inv = run(engine, request, ["sh", "bench.sh"], tmp_path)
    assert inv.outcome is Outcome.COMPLETED
    stdout, _ = engine.log_paths(inv)
    assert stdout.read_bytes() == b"result line\n"
    [artifact] = engine.journal.artifacts(inv.id)
    assert (artifact.path, artifact.state) == ("out/score", "acknowledged")
    assert Path(str(artifact.local_path)).read_bytes() == b"42\n"
    assert "vibesys: exit_code=0" in (stdout.parent / "sky.log").read_text()


def test_cancel_stops_the_job_and_keeps_the_cluster(fake: FakeSky, tmp_path: Path) -> None:
    engine = engine_on(fake, tmp_path)
    inv = engine.prepare(
        adapter="skypilot", command=["sleep", "60"], request=fake.request(), run_root=tmp_path
    )
    inv = drive(engine, inv, DriveOptions(detach=True))
    engine.request_cancel(inv, "test")
    inv = drive(engine, engine.journal.get(inv.id), DriveOptions())
    assert (inv.state, inv.outcome) == (JobState.DONE, Outcome.CANCELLED)
    assert len(fake.calls("cancel")) >= 1 and fake.calls("down") == []
    [lease] = engine.journal.cluster_leases()
    assert lease.state is LeaseState.UP
    assert fake.cluster_state(lease.name) is not None


def test_a_release_waits_for_the_invocations_on_the_cluster(fake: FakeSky, tmp_path: Path) -> None:
    engine = engine_on(fake, tmp_path)
    inv = engine.prepare(
        adapter="skypilot", command=["sleep", "60"], request=fake.request(), run_root=tmp_path
    )
    inv = drive(engine, inv, DriveOptions(detach=True))
    [lease] = engine.journal.cluster_leases()
    with pytest.raises(UsageError, match=f"still serves invocation.* {inv.id}"):
        release_cluster(engine, lease.id, "too early")
    assert engine.journal.cluster_lease(lease.id).state is LeaseState.UP
    assert fake.calls("down") == []


def test_a_crash_after_the_exec_is_reattached_without_a_second_exec(
    fake: FakeSky, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.faults import Crash, crash_at, recover

    engine = engine_on(fake, tmp_path)
    crash_at(monkeypatch, "after_submit_effect")
    # The job runs until the test opens the gate: reconcile must see it running, however slow
    # the machine is.
    gate = tmp_path / "gate"
    wait_then_fail = f"while [ ! -e {gate} ]; do sleep 0.1; done; exit 4"
    with pytest.raises(Crash):
        run(engine, fake.request(), ["sh", "-c", wait_then_fail], tmp_path)
    recover(monkeypatch)
    survivor = engine_on(fake, tmp_path)
    [inv] = survivor.journal.list_invocations()
    assert inv.state is JobState.SUBMITTING and inv.job_id is None
    reconcile(survivor)
    inv = survivor.journal.get(inv.id)
    assert inv.state is JobState.RUNNING and inv.job_id == "1@200"  # found by its name
    gate.touch()
    inv = drive(survivor, inv, DriveOptions())
    assert (inv.outcome, inv.exit_code) == (Outcome.APPLICATION_FAILED, 4)
    assert len(fake.calls("exec")) == 1


def test_journal_show_names_the_cluster_an_attempt_ran_on(fake: FakeSky, tmp_path: Path) -> None:
    engine = engine_on(fake, tmp_path)
    inv = run(engine, fake.request(), ["true"], tmp_path)
    journal = engine.journal
    leases = journal.leases_used_by(inv.id)
    text = show(inv, journal.attempts(inv.id), journal.history(inv.id), (), leases)
    [lease] = journal.cluster_leases()
    assert f"     cluster {lease.name}  lease {lease.id}  up  allocation 200  profile test" in text
    assert "ran on  " in text and "allocation_job_id=200" in text
    assert json.loads(json.dumps([lease.to_json()]))[0]["state"] == "up"


def running_until(engine: Engine, fake: FakeSky, gate: Path, tmp_path: Path) -> Invocation:
    """A campaign's evaluation, left running (detached) until `gate` exists."""
    first = engine.prepare(
        adapter="skypilot",
        command=["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.1; done"],
        request=fake.request(),
        run_root=tmp_path / "runs",
    )
    return drive(engine, first, DriveOptions(detach=True))


def test_one_evaluation_at_a_time_per_campaign_the_others_wait_in_order(
    fake: FakeSky, tmp_path: Path
) -> None:
    engine = engine_on(fake, tmp_path)
    gate = tmp_path / "gate"
    first = running_until(engine, fake, gate, tmp_path)
    assert first.state is JobState.RUNNING
    # Another campaign is not held up; the same campaign is, whatever the resources.
    other = run(engine, fake.request(run_id="campaign-2"), ["true"], tmp_path)
    assert other.outcome is Outcome.COMPLETED
    second, third = (
        engine.prepare(
            adapter="skypilot",
            command=["sh", "-c", f"echo {name}"],
            request=fake.request(resources={"nodes": 2}),
            run_root=tmp_path / "runs",
        )
        for name in ("second", "third")
    )
    for waiting in (second, third):
        engine.journal.release_lease(waiting.id, engine.owner)
    assert engine.advance(second).state is JobState.PREPARED  # waits: nothing is sent
    assert f"1 ahead ({first.id} first" in engine.waiting[second.id]
    assert len(fake.calls("exec")) == 2  # the first and the other campaign's: nothing more
    # The order is the journal's: a process that starts now sees the same queue.
    restarted = engine_on(fake, tmp_path, owner="host:2:2")
    assert restarted.journal.queue_place(third.id).ahead == (first.id, second.id)  # type: ignore[union-attr]
    assert set(restarted.journal.waiting()) == {second.id, third.id}

    told: list[str] = []
    results: dict[str, Invocation] = {}

    def carry_on(owner: str, inv: Invocation) -> None:
        engine = engine_on(fake, tmp_path, owner)
        assert engine.journal.acquire_lease(inv.id, engine.owner, engine.lease_ttl)
        results[inv.id] = drive(engine, inv, DriveOptions(on_wait=told.append))

    waiters = [
        threading.Thread(target=carry_on, args=(f"h:{n}:{n}", inv))
        for n, inv in ((3, third), (4, second))
    ]
    for waiter in waiters:
        waiter.start()
    time.sleep(1.5)
    assert len(fake.calls("exec")) == 2 and told  # both still wait, and were told why
    gate.touch()
    assert drive(engine, first, DriveOptions()).outcome is Outcome.COMPLETED
    for waiter in waiters:
        waiter.join(timeout=30)
    assert results[second.id].outcome is Outcome.COMPLETED
    assert results[third.id].outcome is Outcome.COMPLETED
    # In order: the second's attempt was submitted before the third's, after the first ended.
    started = {
        inv.id: engine.journal.attempts(inv.id)[0].submitted_at for inv in (first, second, third)
    }
    assert started[first.id] < started[second.id] < started[third.id]
    assert engine.journal.history(first.id)[-1].at <= started[second.id]
    assert verify_journal(engine.journal) == []


def test_an_invocation_in_no_queue_is_still_refused_on_a_busy_campaign(
    fake: FakeSky, tmp_path: Path
) -> None:
    """One recorded before the queue existed: the lease's own check still keeps it off a
    cluster another evaluation runs on (REJECTED, nothing sent)."""
    engine = engine_on(fake, tmp_path)
    gate = tmp_path / "gate"
    first = running_until(engine, fake, gate, tmp_path)
    legacy = engine.prepare(
        adapter="skypilot", command=["true"], request=fake.request(), run_root=tmp_path / "runs"
    )
    engine.journal.conn.execute("DELETE FROM campaign_queue WHERE invocation_id=?", (legacy.id,))
    refused = drive(engine, legacy, DriveOptions())
    assert (refused.state, refused.outcome) == (JobState.DONE, Outcome.REJECTED)
    history = json.dumps([row.evidence for row in engine.journal.history(refused.id)])
    assert f"campaign campaign-1 is busy with invocation(s) {first.id}" in history
    assert engine.journal.leases_used_by(refused.id) == []
    gate.touch()
    assert drive(engine, first, DriveOptions()).outcome is Outcome.COMPLETED


@pytest.mark.parametrize(
    ("unreachable_timeout", "meanwhile"),
    [(timedelta(minutes=10), JobState.RUNNING), (timedelta(0), JobState.UNRESOLVED)],
)
def test_an_unreachable_api_server_mid_job_is_waited_out_without_a_second_exec(
    fake: FakeSky, tmp_path: Path, unreachable_timeout: timedelta, meanwhile: JobState
) -> None:
    """TRANSPORT_LOST mid-job: within the unreachable timeout the job is still running; past it, its
    fate is unknown until the control plane answers again and the job is found by name.
    Either way it is never executed again."""
    engine = engine_on(fake, tmp_path)
    engine.unreachable_timeout = unreachable_timeout
    gate = tmp_path / "gate"
    inv = engine.prepare(
        adapter="skypilot",
        command=["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.1; done; echo through"],
        request=fake.request(),
        run_root=tmp_path / "runs",
    )
    inv = drive(engine, inv, DriveOptions(detach=True))
    assert inv.state is JobState.RUNNING
    fake.control("fake-api-down", "2")
    seen = engine.observe(inv)  # `sky queue` fails
    assert seen.sight is Sight.UNREACHABLE and "ApiServerConnectionError" in seen.evidence
    inv = engine.advance(inv, seen)  # (a lookup past the unreachable timeout fails too)
    assert (inv.state, inv.attempt) == (meanwhile, 1)
    gate.touch()
    inv = drive(engine, inv, DriveOptions())
    assert (inv.outcome, inv.exit_code, inv.attempt) == (Outcome.COMPLETED, 0, 1)
    assert len(fake.calls("exec")) == 1 and len(fake.calls("launch")) == 1


def test_run_down_releases_the_cluster_with_the_campaigns_last_evaluation(
    fake: FakeSky, tmp_path: Path
) -> None:
    engine = engine_on(fake, tmp_path)
    first = run(engine, fake.request(), ["true"], tmp_path)
    [lease] = engine.journal.cluster_leases()
    assert lease.state is LeaseState.UP and fake.calls("down") == []
    last = run(engine, fake.request(down=True), ["sh", "-c", "exit 3"], tmp_path)
    assert (first.outcome, last.outcome) == (Outcome.COMPLETED, Outcome.APPLICATION_FAILED)
    lease = engine.journal.cluster_lease(lease.id)
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
    [lease] = engine.journal.cluster_leases()
    assert release_finished_campaigns_of(engine) == []
    assert engine.journal.cluster_lease(lease.id).state is LeaseState.UP
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
    [lease] = engine.journal.cluster_leases()
    assert engine.journal.cluster_lease(lease.id).state is LeaseState.RELEASED
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
    [lease] = engine.journal.cluster_leases()
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
    [lease] = engine.journal.cluster_leases()
    assert [a for a, _ in engine.journal.leases_used_by(inv.id)] == [1, 2]
    assert engine.journal.cluster_lease(lease.id).state is LeaseState.RELEASED
    assert engine.notes[inv.id] == f"released cluster {lease.name} (run --down)"
    assert len(fake.calls("down")) == 1
