"""`decide()` over the whole (state x event) matrix, and the effects each decision authorizes."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.states.state_strategies import EXPECTED, SAMPLES, events
from vibesys.errors import InvalidTransition
from vibesys.states import (
    EVENT_TYPES,
    TERMINAL,
    Cancel,
    Cancelled,
    CancelRequested,
    Collect,
    Collected,
    Decision,
    Event,
    FailureClass,
    Fence,
    FenceIntended,
    Finish,
    Finished,
    InfraFailed,
    JobState,
    Misconfigured,
    Outcome,
    OutcomeUnknown,
    ParentAttemptFailed,
    ParentFailed,
    Poll,
    Rejected,
    Resolve,
    RetryBudgetSpent,
    ScheduleRetry,
    SiteReplaced,
    Submit,
    SubmitDispatched,
    SubmitIntended,
    Submitted,
    decide,
    next_state,
)
from vibesys.states import JobState as S
from vibesys.states.machine import NEXT
from vibesys.states.transitions_machine import decide_by_machine

#: A second event of each type, with other payloads than SAMPLES: a replayed decision must
#: carry the new event's data, not the recorded one's.
OTHER_SAMPLES: dict[str, Event] = {
    "SubmitIntended": SubmitIntended(attempt=3, job_name="vibesys-def456-3"),
    "SubmitDispatched": SubmitDispatched(attempt=3, job_name="vibesys-def456-3"),
    "Misconfigured": Misconfigured(reason="key refused", fix="add the key"),
    "ParentFailed": ParentFailed(parent="feedface00000000", observation="it was REJECTED"),
    "FenceIntended": FenceIntended(attempt=3),
    "ParentAttemptFailed": ParentAttemptFailed(observation="job 7 failed"),
    "Submitted": Submitted(job_id="77", observation="found by name"),
    "Rejected": Rejected(reason="invalid partition"),
    "OutcomeUnknown": OutcomeUnknown(observation="sacct lag"),
    "Finished": Finished(FailureClass.APPLICATION_FAILED, 3, "FAILED exit 3"),
    "InfraFailed": InfraFailed(FailureClass.PREEMPTED, "PREEMPTED", "2030-01-01T00:00:00+00:00"),
    "Collected": Collected(Outcome.APPLICATION_FAILED, 3, "logs home"),
    "RetryBudgetSpent": RetryBudgetSpent(FailureClass.NODE_FAILED, 2),
    "CancelRequested": CancelRequested(by="someone"),
    "Cancelled": Cancelled(observation="cancelled by 0"),
    "SiteReplaced": SiteReplaced("c" * 64, "d" * 64, "moved.toml", "slurm.transport.host", "op"),
}
assert set(OTHER_SAMPLES) == set(SAMPLES)

CANCELLABLE = sorted({s for (s, t) in EXPECTED if t == "Cancelled"})
MATRIX = [(state, cls.__name__) for state in JobState for cls in EVENT_TYPES]

#: The effect each event authorizes once committed, by hand (None: the intent alone, which
#: sends nothing; the dispatch that follows it authorizes the submit).
EFFECT_OF: dict[str, type | None] = {
    "SubmitIntended": None,
    "SubmitDispatched": Submit,
    "Submitted": Poll,
    "Rejected": Finish,
    "Misconfigured": Finish,
    "ParentFailed": Finish,
    "FenceIntended": Fence,
    "ParentAttemptFailed": None,
    "OutcomeUnknown": Resolve,
    "Finished": Collect,
    "InfraFailed": ScheduleRetry,
    "Collected": Finish,
    "RetryBudgetSpent": Finish,
    "CancelRequested": Cancel,
    "Cancelled": Finish,
    "SiteReplaced": None,
}


def test_the_matrix_covers_every_state_and_event() -> None:
    assert set(EFFECT_OF) == {cls.__name__ for cls in EVENT_TYPES}
    assert len(MATRIX) == len(JobState) * len(EVENT_TYPES) == 112


def test_next_is_the_table() -> None:
    assert {key: dest or key[0] for key, dest in NEXT.items()} == EXPECTED


@pytest.mark.parametrize(("state", "trigger"), MATRIX)
def test_decide_follows_the_table_or_refuses(state: JobState, trigger: str) -> None:
    event = SAMPLES[trigger]
    if (state, trigger) in EXPECTED:
        decision = decide(state, event)
        assert decision.state is EXPECTED[(state, trigger)]
        assert next_state(state, event) is decision.state
        wanted = EFFECT_OF[trigger]
        assert [type(e) for e in decision.effects] == ([wanted] if wanted else [])
    else:
        with pytest.raises(InvalidTransition) as refused:
            decide(state, event)
        assert (refused.value.state, refused.value.event) == (state, trigger)
        assert f"event {trigger} is not allowed in state {state}" in str(refused.value)
        with pytest.raises(InvalidTransition):
            next_state(state, event)


@pytest.mark.parametrize("trigger", sorted(SAMPLES))
def test_done_accepts_nothing(trigger: str) -> None:
    for terminal in TERMINAL:
        with pytest.raises(InvalidTransition):
            decide(terminal, SAMPLES[trigger])


def test_decide_is_pure_and_repeatable() -> None:
    event = SubmitIntended(attempt=1, job_name="vibesys-x-1")
    first = decide(S.PREPARED, event)
    assert decide(S.PREPARED, event) == first
    # A refused event leaves nothing behind in the shared machine.
    with pytest.raises(InvalidTransition):
        decide(S.PREPARED, Collected(Outcome.COMPLETED, 0))
    assert decide(S.PREPARED, event) == first


@pytest.mark.parametrize(("attempt", "name"), [(1, "vibesys-a1b2-1"), (3, "vibesys-a1b2-3")])
@pytest.mark.parametrize("source", [S.PREPARED, S.RETRYING])
def test_the_intent_alone_sends_nothing(source: JobState, attempt: int, name: str) -> None:
    decision = decide(source, SubmitIntended(attempt=attempt, job_name=name))
    assert decision == Decision(S.SUBMITTING, ())


@pytest.mark.parametrize(("attempt", "name"), [(1, "vibesys-a1b2-1"), (3, "vibesys-a1b2-3")])
def test_the_dispatch_carries_attempt_and_job_name(attempt: int, name: str) -> None:
    decision = decide(S.SUBMITTING, SubmitDispatched(attempt=attempt, job_name=name))
    assert decision == Decision(S.SUBMITTING, (Submit(attempt=attempt, job_name=name),))


@pytest.mark.parametrize("source", [S.SUBMITTING, S.UNRESOLVED])
def test_a_fence_intent_stays_and_authorizes_the_fence(source: JobState) -> None:
    assert decide(source, FenceIntended(attempt=2)) == Decision(source, (Fence(attempt=2),))


@pytest.mark.parametrize("source", [S.PREPARED, S.SUBMITTING])
def test_misconfigured_ends_without_a_retry(source: JobState) -> None:
    decision = decide(source, Misconfigured("host key changed", "verify the new key"))
    assert decision == Decision(S.DONE, (Finish(Outcome.MISCONFIGURED, None),))


@pytest.mark.parametrize("source", [S.SUBMITTING, S.UNRESOLVED])
def test_submitted_starts_polling(source: JobState) -> None:
    assert decide(source, Submitted(job_id="77")).effects == (Poll(),)


@pytest.mark.parametrize("source", [S.SUBMITTING, S.RUNNING])
def test_unknown_outcome_asks_to_resolve(source: JobState) -> None:
    assert decide(source, OutcomeUnknown("ssh timed out")) == Decision(S.UNRESOLVED, (Resolve(),))


@pytest.mark.parametrize("source", [S.RUNNING, S.UNRESOLVED])
def test_finished_collects(source: JobState) -> None:
    decision = decide(source, Finished(FailureClass.APPLICATION_FAILED, 1))
    assert decision == Decision(S.COLLECTING, (Collect(),))


@pytest.mark.parametrize("source", [S.SUBMITTING, S.RUNNING, S.UNRESOLVED])
def test_infra_failure_schedules_a_retry_not_before(source: JobState) -> None:
    moment = "2030-01-01T00:05:00.000000+00:00"
    decision = decide(source, InfraFailed(FailureClass.PREEMPTED, "PREEMPTED", moment))
    assert decision == Decision(S.RETRYING, (ScheduleRetry(not_before=moment),))


@pytest.mark.parametrize("source", [S.SUBMITTING, S.RUNNING, S.UNRESOLVED, S.COLLECTING])
def test_cancel_request_stays_and_authorizes_cancel(source: JobState) -> None:
    assert decide(source, CancelRequested(by="me")) == Decision(source, (Cancel(),))


@pytest.mark.parametrize(
    ("source", "event", "finish"),
    [
        (S.COLLECTING, Collected(Outcome.COMPLETED, 0), Finish(Outcome.COMPLETED, 0)),
        (
            S.COLLECTING,
            Collected(Outcome.APPLICATION_FAILED, 137, "SIGKILL"),
            Finish(Outcome.APPLICATION_FAILED, 137),
        ),
        (S.COLLECTING, Collected(Outcome.CANCELLED, None), Finish(Outcome.CANCELLED, None)),
        (S.PREPARED, Rejected("bad partition"), Finish(Outcome.REJECTED, None)),
        (S.SUBMITTING, Rejected("bad partition"), Finish(Outcome.REJECTED, None)),
        *[
            (s, ParentFailed("0a1b", "it failed"), Finish(Outcome.DEPENDENCY_FAILED, None))
            for s in (S.PREPARED, S.SUBMITTING, S.RETRYING)
        ],
        (
            S.RETRYING,
            RetryBudgetSpent(FailureClass.NODE_FAILED, 2),
            Finish(Outcome.INFRA_FAILED, None),
        ),
        *[(s, Cancelled("gone"), Finish(Outcome.CANCELLED, None)) for s in CANCELLABLE],
    ],
)
def test_into_done_finish_carries_the_outcome(
    source: JobState,
    event: Collected | Rejected | ParentFailed | RetryBudgetSpent | Cancelled,
    finish: Finish,
) -> None:
    assert decide(source, event) == Decision(S.DONE, (finish,))


def test_every_non_terminal_state_can_be_cancelled_to_done() -> None:
    assert set(CANCELLABLE) == set(JobState) - TERMINAL
    for state in CANCELLABLE:
        if (state, "CancelRequested") in EXPECTED:
            state = decide(state, CancelRequested(by="me")).state
        decision = decide(state, Cancelled("settled"))
        assert decision.state is S.DONE
        assert decision.effects == (Finish(Outcome.CANCELLED, None),)


def test_decide_is_safe_from_several_threads() -> None:
    # The machine is shared by every caller: concurrent decisions must not see each other.
    cases = [(s, SAMPLES[t], EXPECTED[(s, t)]) for (s, t) in sorted(EXPECTED)]
    wrong: list[tuple[JobState, str, Decision]] = []
    start = threading.Barrier(6)

    def worker(offset: int) -> None:
        start.wait()
        for i in range(1500):
            state, event, dest = cases[(i + offset) % len(cases)]
            decision = decide(state, event)
            effect = EFFECT_OF[type(event).__name__]
            if decision.state is not dest or len(decision.effects) != (effect is not None):
                wrong.append((state, type(event).__name__, decision))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert wrong == []


@pytest.mark.parametrize(("state", "trigger"), sorted(EXPECTED))
def test_a_decision_read_from_the_table_is_the_machines(state: JobState, trigger: str) -> None:
    # `decide()` runs the callbacks the table names for the pair: it must equal what the
    # machine itself decides, for one event and for a different one.
    first = decide(state, SAMPLES[trigger])
    assert first == decide_by_machine(state, SAMPLES[trigger])
    other = OTHER_SAMPLES[trigger]
    assert decide(state, other) == decide_by_machine(state, other)


@given(state=st.sampled_from(list(JobState)), event=events)
def test_decide_equals_the_machine_for_any_event(state: JobState, event: Event) -> None:
    try:
        expected = decide_by_machine(state, event)
    except InvalidTransition:
        with pytest.raises(InvalidTransition):
            decide(state, event)
        return
    assert decide(state, event) == expected


def test_reading_the_table_does_not_import_transitions() -> None:
    code = (
        "import sys; from vibesys.states import decide, next_state, JobState; "
        "import vibesys.journal_schema.reads; print('transitions' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
