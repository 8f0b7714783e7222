"""A property over fenced attempts: whatever the interleaving of submits that time out, jobs
that stall before their claim and wake up later, late acceptance by a scheduler, drivers that
crash (and are replaced by another process), unreachable schedulers and reconcile rounds, no two
attempts of one invocation ever run the command, unless the earlier one was proven ended by an
infrastructure failure (a node that died under it) before the next was submitted; and an
attempt retired for an ambiguous submission (fenced) never runs at all."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vibesys.adapters.base import RemoteState
from vibesys.adapters.fake import FakeAttempt, FakeBackend, _Job
from vibesys.engine import Engine, RetryPolicy, reconcile
from vibesys.errors import BackendUnavailable
from vibesys.journal_schema import Journal, open_journal
from vibesys.states import FailureClass, JobState, Outcome

S = RemoteState
TIMEOUT = BackendUnavailable("sbatch: timed out", maybe_submitted=True)

attempts = st.builds(
    FakeAttempt,
    states=st.sampled_from([(S.RUNNING, S.COMPLETED), (S.COMPLETED,), (S.NODE_FAIL,)]),
    exit_code=st.just(0),
    submit_error=st.sampled_from([None, None, TIMEOUT]),
    submitted_despite_error=st.booleans(),
    claims=st.booleans(),
)
actions = st.lists(
    st.sampled_from(["step", "step", "step", "crash", "wake", "late", "outage", "reconcile"]),
    max_size=40,
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(script=st.lists(attempts, min_size=1, max_size=4), plan=actions, seed=st.integers(0, 99))
def test_no_two_attempts_ever_run(
    tmp_path_factory: object, script: list[FakeAttempt], plan: list[str], seed: int
) -> None:
    base = Path(tmp_path_factory.mktemp("fence"))  # type: ignore[attr-defined]
    journal = open_journal(base / "journal.db")
    fake = FakeBackend(list(script))
    late: list[str] = []  # submits that timed out and were not queued: they may arrive later
    real_submit = fake.submit

    def submit(request):  # type: ignore[no-untyped-def]
        before = set(fake.jobs)
        try:
            return real_submit(request)
        finally:
            if request.job_name not in fake.jobs and request.job_name not in before:
                late.append(request.job_name)

    fake.submit = submit  # type: ignore[method-assign]
    generation = [0]

    def engine() -> Engine:
        return Engine(
            journal,
            lambda name, request: fake,
            retry=RetryPolicy(max_retries=3, initial_delay_seconds=0.0),
            owner=f"test:{generation[0]}:1",
        )

    driver = engine()
    inv = driver.prepare(adapter="fake", command=["x"], run_root=base / "runs")
    try:
        for number, action in enumerate(plan):
            inv = journal.invocations.get(inv.id)
            if inv.state is JobState.DONE:
                break
            if action == "step":
                driver.step(inv, driver.observe(inv) if _needs(inv) else None)
            elif action == "crash":  # the driver dies; another process takes over later
                journal.leases.release_lease(inv.id, driver.owner)
                generation[0] += 1
                driver = engine()
            elif action == "wake":  # a stalled job (or a late one) tries to claim now
                for name in list(fake.jobs):
                    fake.wake(name)
            elif action == "late" and late:  # the scheduler accepts an old request now
                name = late.pop((seed + number) % len(late))
                fake.jobs[name] = _Job(name, str(5000 + number), FakeAttempt())
            elif action == "outage":
                fake.status_error = None if fake.status_error else BackendUnavailable("down")
            elif action == "reconcile":
                journal.leases.release_lease(inv.id, driver.owner)
                reconcile(engine())
            check(journal, inv.id, fake)
        # Let everything settle: the scheduler answers, every job wakes, every late request
        # arrives; drive to the end.
        fake.status_error = None
        for name in late:
            fake.jobs[name] = _Job(name, "9999", FakeAttempt())
        for _ in range(60):
            for name in list(fake.jobs):
                fake.wake(name)
            inv = journal.invocations.get(inv.id)
            if inv.state in (JobState.DONE,):
                break
            journal.leases.release_lease(inv.id, driver.owner)
            reconcile(engine())
        check(journal, inv.id, fake)
        if inv.outcome is Outcome.COMPLETED:
            assert fake.ran and fake.ran[-1] == journal.invocations.attempts(inv.id)[-1].job_name
    finally:
        journal.close()


#: How an attempt ends when the infrastructure, provably, ended it under its command.
PROVEN_ENDED = {FailureClass.NODE_FAILED, FailureClass.PREEMPTED, FailureClass.ALLOCATION_EXPIRED}


def check(journal: Journal, invocation_id: str, fake: FakeBackend) -> None:
    by_name = {a.job_name: a for a in journal.invocations.attempts(invocation_id)}
    ran = sorted({name for name in fake.ran}, key=lambda n: by_name[n].attempt)
    for name in ran[:-1]:
        assert by_name[name].failure_class in PROVEN_ENDED, f"two attempts ran: {ran}"
    for attempt in by_name.values():
        if attempt.failure_class is FailureClass.TRANSPORT_LOST:
            assert attempt.job_name not in fake.ran, f"a fenced attempt ran: {attempt.job_name}"


def _needs(inv: object) -> bool:
    from vibesys.engine.plan import needs_observation

    return needs_observation(inv)  # type: ignore[arg-type]
