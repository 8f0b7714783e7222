"""What an invocation was started with is what every process carries it on with: the retry
delays, the unreachable timeout (counted from the first unreachable observation recorded in
the journal) and cancel-when-orphaned are recorded at PREPARED, and `reconcile`, `wait` and a
takeover use them, never their own defaults. Followers never own: their interrupt only stops
them."""

from __future__ import annotations

import signal
from datetime import datetime, timedelta
from pathlib import Path

from freezegun import freeze_time

from vibesys.adapters.base import RemoteState
from vibesys.adapters.fake import FakeAttempt, FakeBackend
from vibesys.cli.render import reconcile_status
from vibesys.engine import DriveOptions, Engine, RetryPolicy, StopFlag, drive, reconcile, wait_for
from vibesys.errors import BackendUnavailable
from vibesys.journal_schema import Invocation, Journal, Settings, iso
from vibesys.states import JobState, Outcome

S = RemoteState
T0 = datetime.fromisoformat("2026-12-01T12:00:00+00:00")


def factory(fake: FakeBackend):  # type: ignore[no-untyped-def]
    return lambda adapter, request: fake


def started(journal: Journal, fake: FakeBackend, tmp_path: Path, **settings: object) -> Invocation:
    """`vibesys run --detach` with these settings: recorded, then left RUNNING, undriven."""
    starter = Engine(journal, factory(fake), **settings)  # type: ignore[arg-type]
    inv = starter.prepare(adapter="fake", command=["x"], run_root=tmp_path / "runs")
    inv = drive(starter, inv, DriveOptions(detach=True))
    assert inv.state is JobState.RUNNING
    return inv


def later(journal: Journal, fake: FakeBackend) -> Engine:
    """Another process, with none of the starter's settings (the engine's defaults: a 2 s
    retry delay, no unreachable timeout at all)."""
    return Engine(journal, factory(fake))


def test_the_settings_are_recorded_at_prepared(journal: Journal, tmp_path: Path) -> None:
    fake = FakeBackend()
    engine = Engine(
        journal,
        factory(fake),
        retry=RetryPolicy(4, initial_delay_seconds=25.0, backoff=3.0, max_delay_seconds=90.0),
        unreachable_timeout=timedelta(seconds=600),
    )
    inv = engine.prepare(
        adapter="fake", command=["x"], run_root=tmp_path, cancel_when_orphaned=True
    )
    assert journal.invocations.get(inv.id).settings == Settings(
        retry_delay_seconds=25.0,
        retry_backoff=3.0,
        retry_max_delay_seconds=90.0,
        unreachable_timeout_seconds=600.0,
        cancel_when_orphaned=True,
    )
    assert journal.invocations.get(inv.id).max_retries == 4
    shown = journal.invocations.get(inv.id).to_json([], [])
    assert shown["settings"]["retry_delay_seconds"] == 25.0
    assert "cancel_when_orphaned" not in shown["request"], "settings are not the request"


def test_a_later_process_retries_with_the_recorded_delay(journal: Journal, tmp_path: Path) -> None:
    """Issue: `--retry-delay 25`, the node fails while another process follows: the retry came
    2 s later (that process's default)."""
    fake = FakeBackend(
        [
            FakeAttempt((S.RUNNING, S.NODE_FAIL)),
            FakeAttempt((S.RUNNING, S.NODE_FAIL)),
            FakeAttempt((S.COMPLETED,)),
        ]
    )
    policy = RetryPolicy(3, initial_delay_seconds=25.0, backoff=3.0)
    inv = started(journal, fake, tmp_path, retry=policy)
    with freeze_time(T0) as clock:
        [row] = reconcile(later(journal, fake))
        assert row.after is JobState.RETRYING
        assert journal.invocations.get(inv.id).not_before == T0 + timedelta(seconds=25)
        clock.tick(24)
        [row] = reconcile(later(journal, fake))
        assert row.after is JobState.RETRYING and fake.submits()[1:] == [], "not before 25 s"
        clock.tick(1)
        reconcile(later(journal, fake))  # attempt 2 is submitted and seen running
        reconcile(later(journal, fake))  # ... and seen failing: the second delay is 25 * 3
        assert journal.invocations.get(inv.id).not_before == T0 + timedelta(seconds=25 + 75)
    assert len(fake.submits()) == 2


def test_reconcile_counts_the_outage_from_its_first_recorded_observation(
    journal: Journal, tmp_path: Path
) -> None:
    """Issue: a reconcile 3 s into a controller outage marked a run started with
    `--unreachable-timeout 600` UNRESOLVED. Repeated reconciles leave it as it is, say until
    when (exit 69), and give up exactly when the recorded time is spent, never before."""
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.COMPLETED))])
    inv = started(journal, fake, tmp_path, unreachable_timeout=timedelta(seconds=600))
    fake.status_error = BackendUnavailable("squeue: Socket timed out on send/recv operation")
    until = iso(T0 + timedelta(seconds=600))
    with freeze_time(T0) as clock:
        for step in (0, 3, 300, 296):  # 0 s, 3 s, 303 s, 599 s into the outage
            clock.tick(step)
            [row] = reconcile(later(journal, fake))
            assert (row.before, row.after, row.waiting_until) == (
                JobState.RUNNING,
                JobState.RUNNING,
                until,
            ), row.evidence
            assert f"unreachable since {iso(T0)}" in row.evidence
            assert "Socket timed out" in row.evidence
            assert reconcile_status(failed=False, waiting=row.waiting) == 69
            assert journal.invocations.unreachable_since(inv.id, 1) == T0
        assert [h.event for h in journal.invocations.history(inv.id)][-1] == "Submitted", (
            "nothing written"
        )
        clock.tick(1)  # 600 s: the timeout is spent
        [row] = reconcile(later(journal, fake))
        assert (row.after, row.waiting) == (JobState.UNRESOLVED, False)
    fake.status_error = None  # the controller is back: the job is followed to its end
    [row] = reconcile(later(journal, fake))
    assert journal.invocations.get(inv.id).outcome is Outcome.COMPLETED and len(fake.submits()) == 1


def test_an_outage_that_ended_does_not_count_for_the_next(journal: Journal, tmp_path: Path) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING,))])
    inv = started(journal, fake, tmp_path, unreachable_timeout=timedelta(seconds=60))
    with freeze_time(T0) as clock:
        fake.status_error = BackendUnavailable("connection refused")
        reconcile(later(journal, fake))
        assert journal.invocations.unreachable_since(inv.id, 1) == T0
        clock.tick(50)
        fake.status_error = None
        [row] = reconcile(later(journal, fake))
        assert (
            row.after is JobState.RUNNING
            and journal.invocations.unreachable_since(inv.id, 1) is None
        )
        clock.tick(50)  # 100 s after the first outage began, 0 s into the second
        fake.status_error = BackendUnavailable("connection refused")
        [row] = reconcile(later(journal, fake))
        assert row.waiting_until == iso(T0 + timedelta(seconds=160))


def test_wait_keeps_waiting_within_the_recorded_timeout(journal: Journal, tmp_path: Path) -> None:
    """`wait` from a process whose own default is no unreachable timeout at all follows a run
    started with a 10-minute timeout through an outage, and never calls its outcome unknown."""
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.RUNNING, S.COMPLETED))])
    inv = started(journal, fake, tmp_path, unreachable_timeout=timedelta(minutes=10))
    real_status = fake.status
    failures = [BackendUnavailable("slurmctld not responding")] * 3

    def flaky(jobs):  # type: ignore[no-untyped-def]
        if failures:
            raise failures.pop()
        return real_status(jobs)

    fake.status = flaky  # type: ignore[method-assign]
    done = wait_for(later(journal, fake), inv.id, DriveOptions(owner=False))
    assert (done.state, done.outcome) == (JobState.DONE, Outcome.COMPLETED)
    assert "OutcomeUnknown" not in [h.event for h in journal.invocations.history(inv.id)]
    assert failures == [], "the outage happened"


def test_reconcile_cancels_an_orphan_by_its_recorded_setting(
    journal: Journal, tmp_path: Path
) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING,))])
    starter = Engine(journal, factory(fake))
    orphan = starter.prepare(
        adapter="fake", command=["x"], run_root=tmp_path, cancel_when_orphaned=True
    )
    drive(starter, orphan, DriveOptions(detach=True))
    kept = started(journal, fake, tmp_path)
    reconcile(later(journal, fake))
    assert journal.invocations.get(orphan.id).cancel_requested
    assert not journal.invocations.get(kept.id).cancel_requested


def test_a_follower_interrupted_stops_and_cancels_nothing(journal: Journal, tmp_path: Path) -> None:
    """`wait` drives an invocation nobody else drives; its SIGHUP stops it there: no cancel,
    the lease is given back, and the next process that looks carries the job to its end."""
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.RUNNING, S.COMPLETED))])
    inv = started(journal, fake, tmp_path)
    stop = StopFlag()
    stop.set(signal.SIGHUP)
    stopped = wait_for(later(journal, fake), inv.id, DriveOptions(interrupt=stop, owner=False))
    assert stopped.state is JobState.RUNNING and stop.signum == signal.SIGHUP
    assert (
        not journal.invocations.get(inv.id).cancel_requested
        and journal.invocations.get(inv.id).lease_owner is None
    )
    assert ("cancel", f"vibesys-{inv.id}-1") not in fake.calls
    done = wait_for(later(journal, fake), inv.id, DriveOptions(owner=False))
    assert (done.state, done.outcome) == (JobState.DONE, Outcome.COMPLETED)


def test_an_owner_interrupted_cancels(journal: Journal, tmp_path: Path) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING,))])
    inv = started(journal, fake, tmp_path)
    stop = StopFlag()
    stop.set(signal.SIGINT)
    assert journal.leases.acquire_lease(inv.id, "me:1:1", timedelta(seconds=30))
    owner = Engine(journal, factory(fake), owner="me:1:1")
    done = drive(owner, journal.invocations.get(inv.id), DriveOptions(interrupt=stop))
    assert (done.state, done.outcome) == (JobState.DONE, Outcome.CANCELLED)
