"""A crash at each failpoint of a run through the SkyPilot adapter, against the scripted fake
`sky` (tests/fake_sky.py): the scenario that reaches the point, then what reconcile and a fresh
driver must make of it. Used by tests/crash/test_every_failpoint.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.faults import Crash, crash_at, recover
from tests.helpers.hang_guard import wait_until
from tests.helpers.skyfake import FakeSky
from vibesys.engine import DriveOptions, Engine, RetryPolicy, drive, reconcile
from vibesys.engine.clusters import release_cluster
from vibesys.journal_schema import (
    LIVE_LEASE_STATES,
    Invocation,
    LeaseState,
    open_journal,
    verify_journal,
)
from vibesys.states import JobState, Outcome

Act = Callable[[Engine, Invocation, FakeSky], object]


@dataclass(frozen=True)
class SkyScenario:
    command: tuple[str, ...] = ("sh", "-c", "echo done")
    outcome: Outcome = Outcome.COMPLETED
    #: what the driver does after preparing (default: drive to the end)
    act: Act | None = None
    artifacts: tuple[str, ...] = ()
    #: attempts whose command started
    runs: int = 1
    launches: int = 1
    #: the scenario ends with the campaign's cluster released
    released: bool = False
    #: execs that fail as an unreachable API server does (nothing submitted, nothing proven)
    failing_execs: int = 0


def _until_claimed(engine: Engine, inv: Invocation, fake: FakeSky) -> Invocation:
    inv = drive(engine, inv, DriveOptions(detach=True))
    claims = f"{inv.id}/*/claim"
    wait_until(lambda: list(fake.remote.glob(claims)), 60, "the job to claim its attempt")
    return engine.journal.invocations.get(inv.id)


def cancel_a_running_job(engine: Engine, inv: Invocation, fake: FakeSky) -> object:
    return engine.request_cancel(_until_claimed(engine, inv, fake), "test")


def lose_the_allocation(engine: Engine, inv: Invocation, fake: FakeSky) -> object:
    inv = _until_claimed(engine, inv, fake)
    [lease] = engine.journal.clusters.cluster_leases()
    fake.control("fake-lose", lease.name)
    return drive(engine, inv, DriveOptions())


def release_after_the_run(engine: Engine, inv: Invocation, fake: FakeSky) -> object:
    inv = drive(engine, inv, DriveOptions())
    [lease] = engine.journal.clusters.cluster_leases()
    return release_cluster(engine, lease.id, "campaign over")


DONE = SkyScenario()
AMBIGUOUS_EXEC = SkyScenario(failing_execs=1)
SECOND_ATTEMPT_QUICK = ("sh", "-c", 'case "$PWD" in */2/work) exit 0 ;; esac; sleep 30')
SKY_SCENARIOS: dict[str, SkyScenario] = {
    "after_prepare_commit": DONE,
    "after_submit_intent": DONE,
    "after_submit_dispatch": DONE,
    "after_submit_effect": DONE,
    "after_submitted_commit": DONE,
    "after_terminal_observed": DONE,
    "after_finished_commit": DONE,
    "after_collect_effect": DONE,
    "after_done_commit": DONE,
    "after_infra_failed_commit": SkyScenario(
        SECOND_ATTEMPT_QUICK, act=lose_the_allocation, runs=2, launches=2
    ),
    "after_unknown_commit": AMBIGUOUS_EXEC,
    "after_fence_intent": AMBIGUOUS_EXEC,
    "after_fence_effect": AMBIGUOUS_EXEC,
    "after_cancel_intent": SkyScenario(
        ("sleep", "60"), Outcome.CANCELLED, act=cancel_a_running_job
    ),
    "after_cancel_effect": SkyScenario(
        ("sleep", "60"), Outcome.CANCELLED, act=cancel_a_running_job
    ),
    "after_spool_append": SkyScenario(("sh", "-c", "echo some output")),
    "after_artifact_download": SkyScenario(
        ("sh", "-c", "echo 42 > result.txt"), artifacts=("*.txt",)
    ),
    "after_launch_intent": DONE,
    "after_launch_effect": DONE,
    "after_release_intent": SkyScenario(act=release_after_the_run, released=True),
    "after_release_effect": SkyScenario(act=release_after_the_run, released=True),
}


def crash_and_recover(
    fake: FakeSky, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    scenario = SKY_SCENARIOS[point]

    def engine(owner: str) -> Engine:
        return Engine(
            open_journal(tmp_path / "j.db"),
            lambda adapter, request: fake.registry_backend(request),  # type: ignore[arg-type]
            retry=RetryPolicy(max_retries=2, initial_delay_seconds=0.0),
            owner=owner,
        )

    if scenario.failing_execs:
        fake.control("fake-fail-exec", str(scenario.failing_execs))
    crashed = engine("host:1:1")
    crash_at(monkeypatch, point)
    with pytest.raises(Crash):
        inv = crashed.prepare(
            adapter="skypilot",
            command=list(scenario.command),
            request=fake.request(artifacts=scenario.artifacts),
            run_root=tmp_path / "runs",
        )
        (scenario.act or (lambda e, i, f: drive(e, i, DriveOptions())))(crashed, inv, fake)
    recover(monkeypatch)
    # The crashed process's identity is the survivor's: as if its pid had been checked dead.
    survivor = engine("host:1:1")
    [inv] = survivor.journal.invocations.list_invocations()
    reconcile(survivor)
    inv = drive(survivor, survivor.journal.invocations.get(inv.id), DriveOptions())
    if scenario.released:
        reconcile(survivor)  # the release itself is only the lease's
    assert (inv.state, inv.outcome) == (JobState.DONE, scenario.outcome)
    claims = [p for p in fake.remote.glob("*/*/claim") if p.read_text().startswith("kind=job")]
    assert len(claims) == scenario.runs, f"attempts that ran: {claims}"
    execs = [call[-1] for call in fake.calls("exec")]
    assert len(execs) == len(set(execs)), f"an attempt was executed twice: {execs}"
    assert len(fake.calls("launch")) == scenario.launches
    leases = survivor.journal.clusters.cluster_leases()
    assert all(lease.state not in (LeaseState.LAUNCHING, LeaseState.RELEASING) for lease in leases)
    live = [lease for lease in leases if lease.state in LIVE_LEASE_STATES]
    # Never a cluster nobody records: every cluster of the fake has its live lease.
    clusters = [name for name in (lease.name for lease in leases) if fake.cluster_state(name)]
    assert sorted(set(clusters)) == sorted(lease.name for lease in live)
    if scenario.released:
        assert live == [] and clusters == []
        assert leases[-1].state is LeaseState.RELEASED
    else:
        assert [lease.state for lease in live] == [LeaseState.UP]
    assert verify_journal(survivor.journal) == []
