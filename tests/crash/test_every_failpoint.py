"""Every failpoint is crashed at, by running it: each has a scenario that must reach it (the
test fails if the crash does not happen), then a fresh engine reconciles and drives to the end,
and the job ran exactly as often as it should. Coverage is checked by these runs, not by a
search for the name in the test sources."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.crash.sky_scenarios import SKY_SCENARIOS, crash_and_recover
from tests.helpers.failpoints import CLIENT_FAILPOINTS, GROUPS, LEASE_FAILPOINTS
from tests.helpers.faults import Crash, crash_at, recover
from tests.helpers.skyfake import make_fake_sky
from vibesys.adapters.base import RemoteState
from vibesys.adapters.fake import FakeAttempt, FakeBackend, FakeRequest
from vibesys.engine import FAILPOINTS, DriveOptions, Engine, RetryPolicy, drive, reconcile
from vibesys.errors import BackendUnavailable
from vibesys.journal_schema import Invocation, open_journal, verify_journal
from vibesys.states import JobState, Outcome

S = RemoteState
TIMEOUT = BackendUnavailable("sbatch timed out", maybe_submitted=True)


@dataclass(frozen=True)
class Scenario:
    attempts: tuple[FakeAttempt, ...]
    outcome: Outcome
    #: what the driver does after preparing (default: drive to the end)
    act: Callable[[Engine, Invocation, FakeBackend], object] | None = None
    artifacts: tuple[str, ...] = ()
    #: attempts whose command ran (2 only when a node provably died under the first)
    runs: int = 1


def cancel_a_running_job(engine: Engine, inv: Invocation, fake: FakeBackend) -> object:
    inv = drive(engine, inv, DriveOptions(detach=True))
    return engine.request_cancel(inv, "test")


def with_output(engine: Engine, inv: Invocation, fake: FakeBackend) -> object:
    fake.logs[(f"vibesys-{inv.id}-1", "stdout")] = bytearray(b"some output\n")
    return drive(engine, inv, DriveOptions())


def with_artifact(engine: Engine, inv: Invocation, fake: FakeBackend) -> object:
    fake.files[f"vibesys-{inv.id}-1"] = {"result.txt": b"42\n"}
    return drive(engine, inv, DriveOptions())


DONE = (FakeAttempt((S.RUNNING, S.COMPLETED)),)
SCENARIOS: dict[str, Scenario] = {
    "after_prepare_commit": Scenario(DONE, Outcome.COMPLETED),
    "after_submit_intent": Scenario(DONE, Outcome.COMPLETED),
    "after_submit_dispatch": Scenario(DONE, Outcome.COMPLETED),
    "after_submit_effect": Scenario(DONE, Outcome.COMPLETED),
    "after_submitted_commit": Scenario(DONE, Outcome.COMPLETED),
    "after_terminal_observed": Scenario(DONE, Outcome.COMPLETED),
    "after_finished_commit": Scenario(DONE, Outcome.COMPLETED),
    "after_collect_effect": Scenario(DONE, Outcome.COMPLETED),
    "after_done_commit": Scenario(DONE, Outcome.COMPLETED),
    "after_infra_failed_commit": Scenario(
        (FakeAttempt((S.NODE_FAIL,)), FakeAttempt((S.COMPLETED,))), Outcome.COMPLETED, runs=2
    ),
    "after_unknown_commit": Scenario(
        (FakeAttempt((S.RUNNING, S.UNKNOWN, S.COMPLETED)),), Outcome.COMPLETED
    ),
    "after_fence_intent": Scenario(
        (FakeAttempt(submit_error=TIMEOUT), FakeAttempt((S.COMPLETED,))), Outcome.COMPLETED
    ),
    "after_fence_effect": Scenario(
        (FakeAttempt(submit_error=TIMEOUT), FakeAttempt((S.COMPLETED,))), Outcome.COMPLETED
    ),
    "after_cancel_intent": Scenario(
        (FakeAttempt((S.RUNNING,)),), Outcome.CANCELLED, cancel_a_running_job
    ),
    "after_cancel_effect": Scenario(
        (FakeAttempt((S.RUNNING,)),), Outcome.CANCELLED, cancel_a_running_job
    ),
    "after_spool_append": Scenario(DONE, Outcome.COMPLETED, with_output),
    "after_artifact_download": Scenario(
        DONE, Outcome.COMPLETED, with_artifact, artifacts=("*.txt",)
    ),
}


def test_every_failpoint_has_a_scenario() -> None:
    # The lease points only an adapter holding its own allocation (SkyPilot) reaches, so the
    # fake backend's scenarios cannot; the client's point tests/client/test_client_keys_crash.py
    # crashes at.
    assert sorted([*SCENARIOS, *LEASE_FAILPOINTS, *CLIENT_FAILPOINTS]) == sorted(FAILPOINTS)
    assert sorted([*SKY_SCENARIOS, *CLIENT_FAILPOINTS]) == sorted(FAILPOINTS)


def test_the_failpoint_groups_hold_every_failpoint_once() -> None:
    grouped = [point for group in GROUPS for point in group]
    assert sorted(grouped) == sorted(FAILPOINTS)


@pytest.mark.parametrize("point", sorted(SKY_SCENARIOS))
def test_crash_at_each_failpoint_on_skypilot_then_recover(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    """The same, through the SkyPilot adapter and its cluster lease, on the fake `sky`."""
    fake = make_fake_sky(tmp_path)
    try:
        crash_and_recover(fake, tmp_path, monkeypatch, point)
    finally:
        fake.stop_jobs()


@pytest.mark.parametrize("point", sorted(SCENARIOS))
def test_crash_at_each_failpoint_then_recover(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    scenario = SCENARIOS[point]
    fake = FakeBackend(list(scenario.attempts))
    policy = RetryPolicy(max_retries=2, initial_delay_seconds=0.0)

    def engine(owner: str) -> Engine:
        return Engine(open_journal(tmp_path / "j.db"), lambda n, r: fake, retry=policy, owner=owner)

    crashed = engine("host:1:1")
    crash_at(monkeypatch, point)
    with pytest.raises(Crash):
        inv = crashed.prepare(
            adapter="fake",
            command=["x"],
            request=FakeRequest(artifacts=scenario.artifacts),
            run_root=tmp_path,
        )
        (scenario.act or (lambda e, i, f: drive(e, i, DriveOptions())))(crashed, inv, fake)
    recover(monkeypatch)
    # The crashed process's lease is its own identity: a survivor with the same identity
    # (as if the pid had been checked dead) takes over.
    survivor = engine("host:1:1")
    [inv] = survivor.journal.invocations.list_invocations()
    for _ in range(5):
        reconcile(survivor)
        inv = survivor.journal.invocations.get(inv.id)
        if inv.state is JobState.DONE:
            break
    assert (inv.state, inv.outcome) == (JobState.DONE, scenario.outcome)
    assert len(fake.ran) == scenario.runs, f"attempts that ran: {fake.ran}"
    events = [h.event for h in survivor.journal.invocations.history(inv.id)]
    if point == "after_fence_effect":
        # The fence written before the crash is read back as a fence: not written again.
        assert events.count("FenceIntended") == 1, events
    assert len(fake.submits()) == len(set(fake.submits())), "an attempt was submitted twice"
    assert verify_journal(survivor.journal) == []
