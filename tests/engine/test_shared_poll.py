"""One poll budget per host and site (engine/shared_poll.py), against a scripted backend that
declares its status calls shared: two engines stand for two processes on this host, each with
its own connection to one journal and its own owner identity, both reaching one scheduler.
No timings: the clock is the engines' own, moved by hand.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from vibesys.adapters.base import JobRef, PollSchedule, RemoteState, RemoteStatus
from vibesys.adapters.fake import FakeAttempt, FakeBackend
from vibesys.engine import DriveOptions, Engine, RetryPolicy, drive, reconcile
from vibesys.engine.seen import Sight
from vibesys.journal_schema import Invocation, Journal, iso, open_journal
from vibesys.journal_schema.codec import decode_record, encode_record
from vibesys.osutil.proc import hostname, start_time
from vibesys.states import CancelRequested, JobState

S = RemoteState
SITE = "fake-site"


@dataclass
class SharedFake(FakeBackend):
    """The fake scheduler, declaring its status calls shared per site (SharedPolling)."""

    floor: float = 0.0
    settle: float = 0.0
    #: job names whose end marker a probe finds
    ended: set[str] = field(default_factory=set)
    probes: list[list[str]] = field(default_factory=list)
    facts_asked: int = 0

    # -- what the engine may ask of it (adapters.base.Backend) ---------------------------

    def shared_polling(self) -> SharedFake:
        return self

    def poll_site(self) -> str:
        return SITE

    def site_facts(self) -> dict[str, str]:
        self.facts_asked += 1
        return {"SlurmctldParameters": "(null)"}

    def poll_schedule(self, facts: object) -> PollSchedule:
        return PollSchedule(self.floor, 2.0, 30.0, 2.0, 0.25, settle=self.settle)

    def probe(self, jobs: Sequence[JobRef]) -> set[str]:
        self.probes.append([j.job_name for j in jobs])
        return {j.job_name for j in jobs} & self.ended

    def status_calls(self) -> list[list[str]]:
        return [names.split(",") for kind, names in self.calls if kind == "status"]


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def fake() -> SharedFake:
    return SharedFake([FakeAttempt((S.RUNNING,)), FakeAttempt((S.RUNNING,))])


@pytest.fixture
def second_journal(journal: Journal) -> Iterator[Journal]:
    other = open_journal(journal.path)
    yield other
    other.close()


def engine(journal: Journal, fake: FakeBackend, clock: Clock, owner: str) -> Engine:
    return Engine(
        journal,
        lambda name, request: fake,
        retry=RetryPolicy(max_retries=2, initial_delay_seconds=0.0),
        owner=owner,
        clock=clock,
    )


def running(eng: Engine, tmp_path: Path) -> Invocation:
    """A new invocation, submitted: RUNNING and waiting for its first observation."""
    inv = eng.prepare(adapter="fake", command=["x"], run_root=tmp_path / "runs")
    inv = eng.advance(inv)
    assert inv.state is JobState.RUNNING
    return inv


def make_due(journal: Journal, clock: Clock) -> None:
    with journal.write_txn() as conn:
        conn.execute("UPDATE poll_sites SET due_at=? WHERE site=?", (iso(clock()), SITE))


def test_two_drivers_share_one_query_per_round(
    journal: Journal, second_journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    b = engine(second_journal, fake, clock, "elsewhere:2:1")
    inv_a, inv_b = running(a, tmp_path), running(b, tmp_path)
    # Each submission's first look found no round for its version yet: at most the one round
    # that ran then, which the other had not registered for.
    before = len(fake.status_calls())
    assert before <= 2
    for _ in range(3):
        clock.advance(5)
        make_due(journal, clock)
        seen_a = a.observe(journal.get(inv_a.id))
        seen_b = b.observe(second_journal.get(inv_b.id))
        assert seen_a is not None and seen_a.sight is Sight.RUNNING
        assert seen_b is not None and seen_b.sight is Sight.RUNNING
    rounds = fake.status_calls()[before:]
    # One scheduler query per round, for both invocations, whoever ran it.
    assert len(rounds) == 3
    names = {f"vibesys-{inv_a.id}-1", f"vibesys-{inv_b.id}-1"}
    assert all(set(r) == names for r in rounds)
    assert a.shared.rounds_run + b.shared.rounds_run == before + 3
    site = journal.poll_site(SITE)
    assert site is not None and site.round == before + 3


def test_newly_watched_jobs_wait_the_initial_delay_for_their_first_round(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    inv = running(a, tmp_path)  # its first look registered it
    assert fake.status_calls() == []  # just submitted: no scheduler query yet
    clock.advance(1.9)
    assert a.observe(journal.get(inv.id)) is None
    assert fake.status_calls() == []
    clock.advance(0.2)  # 2 s, the schedule's initial delay
    assert a.observe(journal.get(inv.id)) is not None
    assert len(fake.status_calls()) == 1


def test_a_burst_of_submissions_gets_one_first_round_when_its_newest_is_due(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    first = running(a, tmp_path)
    clock.advance(1.0)
    second = running(a, tmp_path)  # one second later: the first look waits for it too
    clock.advance(1.5)  # 2.5 s: the first job's initial delay is past, the second's is not
    assert a.observe(journal.get(first.id)) is None
    assert fake.status_calls() == []
    clock.advance(0.6)  # 3.1 s: the second's is past; one round sees both
    assert a.observe(journal.get(first.id)) is not None
    assert a.observe(journal.get(second.id)) is not None
    assert len(fake.status_calls()) == 1


def test_a_stream_of_submissions_does_not_put_the_first_round_off_for_ever(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    first = running(a, tmp_path)
    for _ in range(6):  # a new job every 0.7 s
        clock.advance(0.7)
        running(a, tmp_path)
        if fake.status_calls():
            break
    # The oldest waits at most twice the initial delay (2 s) for its first round.
    clock.advance(max(0.0, 4.0 - 0.7 * 6) + 0.01)
    a.observe(journal.get(first.id))
    assert len(fake.status_calls()) == 1


def test_a_round_not_yet_due_is_not_run(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    inv = running(a, tmp_path)
    clock.advance(1)
    calls = len(fake.status_calls())
    assert a.observe(journal.get(inv.id)) is None  # read already, next round not due
    assert len(fake.status_calls()) == calls
    assert 0 < a.shared.pause(journal.get(inv.id), fake) <= 1.0


def test_observations_older_than_a_round_are_never_read_as_fresh(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    inv = running(a, tmp_path)
    clock.advance(5)
    make_due(journal, clock)
    assert a.observe(journal.get(inv.id)) is not None
    # The same round is never handed out twice.
    assert a.observe(journal.get(inv.id)) is None
    # A commit after the round: its observation was taken for the version before, so it is
    # not fresh for the new one, even for a process that never read it.
    moved = a.commit(journal.get(inv.id), CancelRequested(by="test"))
    fresh_process = engine(journal, fake, clock, "elsewhere:3:1")
    assert fresh_process.observe(moved) is None
    observation = journal.observation(SITE, inv.id)
    assert observation is not None and observation.version == moved.version - 1


def test_a_round_that_overlaps_a_commit_stays_stale(
    journal: Journal, second_journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    b = engine(second_journal, fake, clock, "elsewhere:2:1")
    inv = running(a, tmp_path)
    make_due(journal, clock)
    assert b.observe(second_journal.get(inv.id)) is not None  # b ran and read a first round
    clock.advance(5)
    make_due(journal, clock)
    real_status = fake.status

    def status_while_a_commits(jobs: Sequence[JobRef]) -> dict[str, RemoteStatus]:
        # The driver commits while the poller waits for the scheduler's answer.
        a.commit(journal.get(inv.id), CancelRequested(by="test"))
        return real_status(jobs)

    fake.status = status_while_a_commits  # type: ignore[method-assign]
    assert b.shared.observe_now([second_journal.get(inv.id)], fake) is not None
    fake.status = real_status  # type: ignore[method-assign]
    site = journal.poll_site(SITE)
    assert site is not None and site.round == 2
    # b's round read version v before the commit made v+1: a's driver must not take it.
    assert a.observe(journal.get(inv.id)) is None


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
        assert a.observe(journal.get(inv.id)) is None
        assert len(fake.status_calls()) == calls
        assert a.shared.pause(journal.get(inv.id), fake) == pytest.approx(0.05)
    finally:
        live.kill()
        live.wait()
    # It died in the middle of its round: the lease passes at once, expiry or not.
    assert a.observe(journal.get(inv.id)) is not None
    assert len(fake.status_calls()) == calls + 1
    site = journal.poll_site(SITE)
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
        assert a.observe(journal.get(inv.id)) is None
        assert len(fake.status_calls()) == calls
        # Past it, the round passes to another although the holder still lives.
        clock.advance(121)
        assert a.observe(journal.get(inv.id)) is not None
        assert len(fake.status_calls()) == calls + 1
        # The frozen poller wakes up and finishes its (stale) round: nothing is stored.
        rounds = journal.poll_site(SITE)
        assert rounds is not None
        assert journal.finish_round(SITE, holder, clock(), clock(), []) is None
        after = journal.poll_site(SITE)
        assert after is not None and after.round == rounds.round
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
        frozen.kill()
        frozen.wait()


def take_lease(journal: Journal, holder: str, clock: Clock) -> None:
    with journal.write_txn() as conn:
        conn.execute(
            "UPDATE poll_sites SET poller=?, poller_expires_at=? WHERE site=?",
            (holder, iso(clock() + timedelta(hours=1)), SITE),
        )


def test_an_expired_lease_of_another_host_passes_on(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    inv = running(a, tmp_path)
    take_lease(journal, "another-host:77:1", clock)
    clock.advance(5)
    make_due(journal, clock)
    assert a.observe(journal.get(inv.id)) is None  # its liveness is unknown: wait for expiry
    clock.advance(3600)
    make_due(journal, clock)
    assert a.observe(journal.get(inv.id)) is not None


def test_a_probe_that_finds_an_end_brings_the_round_forward(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    fake.settle = 0.5  # no other job runs: nobody to wait for
    a = engine(journal, fake, clock, "elsewhere:1:1")
    inv = running(a, tmp_path)
    fake.probes.clear()
    rounds = len(fake.status_calls())
    clock.advance(0.5)  # the next round is 2 s away; the probe is due
    assert a.observe(journal.get(inv.id)) is None
    assert fake.probes == [[f"vibesys-{inv.id}-1"]]
    assert len(fake.status_calls()) == rounds  # a probe is no scheduler query
    fake.ended.add(f"vibesys-{inv.id}-1")
    clock.advance(0.5)
    assert a.observe(journal.get(inv.id)) is None  # this probe finds the marker...
    assert a.observe(journal.get(inv.id)) is not None  # ... and the round runs at once
    assert len(fake.status_calls()) == rounds + 1


def test_ends_found_together_are_confirmed_by_one_round(
    journal: Journal, second_journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    fake.settle = 0.5
    fake.attempts.append(FakeAttempt((S.RUNNING,)))
    a = engine(journal, fake, clock, "elsewhere:1:1")
    b = engine(second_journal, fake, clock, "elsewhere:2:1")
    inv_a, inv_b, still = running(a, tmp_path), running(b, tmp_path), running(a, tmp_path)
    names = [f"vibesys-{inv.id}-1" for inv in (inv_a, inv_b, still)]
    rounds = len(fake.status_calls())
    fake.ended.add(names[0])
    clock.advance(0.5)
    assert a.observe(journal.get(inv_a.id)) is None  # the probe finds a's end: a round in 0.5 s
    assert len(fake.status_calls()) == rounds
    fake.ended.add(names[1])
    clock.advance(0.25)
    # b's probe finds b's end too: the round is neither run at once nor put off.
    assert b.observe(second_journal.get(inv_b.id)) is None
    assert len(fake.status_calls()) == rounds
    due = journal.poll_site(SITE).due_at  # type: ignore[union-attr]
    assert due == clock() + timedelta(seconds=0.25)
    clock.advance(0.25)
    assert a.observe(journal.get(inv_a.id)) is not None
    assert b.observe(second_journal.get(inv_b.id)) is not None
    assert len(fake.status_calls()) == rounds + 1
    assert sorted(fake.status_calls()[-1]) == sorted(names)


def test_the_floor_holds_between_rounds(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    fake.floor = 10.0
    a = engine(journal, fake, clock, "elsewhere:1:1")
    inv = running(a, tmp_path)
    make_due(journal, clock)
    assert a.observe(journal.get(inv.id)) is not None  # a round: the floor counts from here
    fake.ended.add(f"vibesys-{inv.id}-1")
    rounds = len(fake.status_calls())
    for _ in range(8):  # 4 s of probes that all find the marker
        clock.advance(0.5)
        a.observe(journal.get(inv.id))
    assert len(fake.status_calls()) == rounds
    clock.advance(7)  # 11 s after the last round started: past the floor
    assert a.observe(journal.get(inv.id)) is not None
    assert len(fake.status_calls()) == rounds + 1


def test_the_site_facts_are_read_once_for_every_process(
    journal: Journal, second_journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    b = engine(second_journal, fake, clock, "elsewhere:2:1")
    inv_a, inv_b = running(a, tmp_path), running(b, tmp_path)
    for _ in range(3):
        clock.advance(5)
        make_due(journal, clock)
        b.observe(second_journal.get(inv_b.id))
        a.observe(journal.get(inv_a.id))
    assert fake.facts_asked == 1
    site = journal.poll_site(SITE)
    assert site is not None and site.facts == {"SlurmctldParameters": "(null)"}


def test_reconcile_uses_the_sites_round(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    invs = [running(a, tmp_path) for _ in range(2)]
    for inv in invs:
        journal.release_lease(inv.id, a.owner)
    calls = len(fake.status_calls())
    clock.advance(5)
    rows = reconcile(engine(journal, fake, clock, "elsewhere:4:1"))
    assert [r.after for r in rows] == [JobState.RUNNING, JobState.RUNNING]
    assert len(fake.status_calls()) == calls + 1
    assert set(fake.status_calls()[-1]) == {f"vibesys-{inv.id}-1" for inv in invs}


def test_a_shared_site_drives_to_the_end(journal: Journal, tmp_path: Path) -> None:
    fake = SharedFake([FakeAttempt((S.PENDING, S.RUNNING, S.COMPLETED), exit_code=0)])
    eng = Engine(journal, lambda name, request: fake)
    inv = eng.prepare(adapter="fake", command=["x"], run_root=tmp_path / "runs")
    fake.floor = 0.0
    done = drive(eng, inv, DriveOptions())
    assert done.state is JobState.DONE and done.exit_code == 0


@pytest.mark.parametrize(
    "sight",
    [Sight.QUEUED, Sight.RUNNING, Sight.ENDED, Sight.UNREACHABLE, Sight.BLOCKED],
)
def test_observations_round_trip_through_the_journal(sight: Sight) -> None:
    from vibesys.engine.seen import Seen
    from vibesys.states import FailureClass

    seen = Seen(
        sight,
        "squeue: 5|x|PENDING|Priority|main|N/A|",
        "5",
        FailureClass.APPLICATION_FAILED if sight is Sight.ENDED else None,
        3 if sight is Sight.ENDED else None,
        "fix it" if sight is Sight.BLOCKED else "",
        sight is Sight.ENDED,
        datetime(2030, 1, 1, tzinfo=UTC) if sight is Sight.UNREACHABLE else None,
        "Priority",
        "main",
        None,
    )
    assert decode_record(Seen, encode_record(seen)) == seen


def test_an_observation_recorded_before_the_codec_still_reads() -> None:
    # The JSON object of every field, in field order, as rounds wrote it before.
    from vibesys.engine.seen import Seen
    from vibesys.states import FailureClass

    old = (
        '{"sight": "ended", "evidence": "sacct: 5|FAILED|3:0", "job_id": "5", '
        '"failure_class": "APPLICATION_FAILED", "exit_code": 3, "fix": "", "final": true, '
        '"since": "2030-01-01T00:00:00.000000+00:00", "reason": null, "partition": "main", '
        '"nodes": null}'
    )
    seen = decode_record(Seen, old)
    assert seen == Seen(
        Sight.ENDED,
        "sacct: 5|FAILED|3:0",
        "5",
        FailureClass.APPLICATION_FAILED,
        3,
        "",
        True,
        datetime(2030, 1, 1, tzinfo=UTC),
        None,
        "main",
        None,
    )


def test_an_observation_is_stale_once_the_next_round_is_due(
    journal: Journal, second_journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    inv = running(a, tmp_path)
    make_due(journal, clock)
    assert a.observe(journal.get(inv.id)) is not None  # round 1
    # Much later, another process arrives while someone else runs the overdue round: round
    # 1 is older than a round by now, and it must wait for the new one.
    clock.advance(600)
    take_lease(journal, "another-host:77:1", clock)
    late = engine(second_journal, fake, clock, "elsewhere:2:1")
    assert late.observe(second_journal.get(inv.id)) is None
    observation = journal.observation(SITE, inv.id)
    assert observation is not None and observation.round == 1


def test_reconcile_asks_anew_even_after_a_recent_round(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    inv = running(a, tmp_path)
    make_due(journal, clock)
    assert a.observe(journal.get(inv.id)) is not None
    journal.release_lease(inv.id, a.owner)
    calls = len(fake.status_calls())
    clock.advance(1)  # the floor (0 here) allows a round; the schedule's next one is later
    reconcile(engine(journal, fake, clock, "elsewhere:4:1"))
    assert len(fake.status_calls()) == calls + 1


def test_a_retried_invocation_is_watched_again_after_a_round_forgot_it(
    journal: Journal, second_journal: Journal, clock: Clock, tmp_path: Path
) -> None:
    fake = SharedFake([FakeAttempt((S.PREEMPTED,)), FakeAttempt((S.RUNNING, S.COMPLETED))])
    a = engine(journal, fake, clock, "elsewhere:1:1")
    a.retry = RetryPolicy(max_retries=2, initial_delay_seconds=2.0)  # a backoff to forget in
    other = engine(second_journal, fake, clock, "elsewhere:2:1")
    inv = running(a, tmp_path)
    make_due(journal, clock)
    inv = a.advance(journal.get(inv.id))  # the round sees PREEMPTED: RETRYING
    assert inv.state is JobState.RETRYING
    # Another process's round meanwhile forgets it: it needs no observation while RETRYING.
    clock.advance(5)
    make_due(journal, clock)
    other_inv = running(other, tmp_path)
    make_due(journal, clock)
    assert other.observe(second_journal.get(other_inv.id)) is not None
    assert journal.observation(SITE, inv.id) is None
    # Attempt 2 runs: its driver must register it again, or no round would ever look at it.
    clock.advance(5)
    inv = a.advance(journal.get(inv.id))
    assert (inv.state, inv.attempt) == (JobState.RUNNING, 2)
    for _ in range(6):
        clock.advance(5)
        make_due(journal, clock)
        inv = a.advance(journal.get(inv.id))
    assert inv.state is JobState.DONE and inv.outcome is not None
    assert inv.outcome.value == "COMPLETED"


def test_taking_the_poller_lease_is_refused_while_a_live_process_holds_it(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    # The lease itself (not only the callers' look before it): two processes that both saw
    # the lease free race for it in the journal, and only one gets it.
    a = engine(journal, fake, clock, "elsewhere:1:1")
    running(a, tmp_path)
    make_due(journal, clock)
    taken = journal.take_poller(SITE, "elsewhere:1:1", timedelta(minutes=2), clock(), after_round=0)
    assert taken is not None
    assert (
        journal.take_poller(SITE, "elsewhere:2:1", timedelta(minutes=2), clock(), after_round=0)
        is None
    )
    site = journal.poll_site(SITE)
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
    site = journal.poll_site(SITE)
    assert site is not None
    ttl = timedelta(minutes=2)
    assert journal.take_poller(SITE, "elsewhere:2:1", ttl, clock(), after_round=site.round) is None
    assert journal.poll_site(SITE) == site  # nothing written
    forced = journal.take_poller(
        SITE, "elsewhere:2:1", ttl, clock(), after_round=site.round, force=True
    )
    assert forced is not None
    after = journal.poll_site(SITE)
    assert after is not None and after.poller == "elsewhere:2:1"
