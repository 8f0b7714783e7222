"""Hypothesis strategies and examples for the events of `vibesys.states`.

Expected destinations are computed here from the raw rows of the table, independently of
`machine.NEXT`, so the tests compare `decide()` with the data rather than with itself.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from vibesys.states import (
    EVENT_TYPES,
    INITIAL,
    OUTCOME_OF,
    RETRYABLE,
    Cancelled,
    CancelRequested,
    Collected,
    Event,
    FailureClass,
    Finished,
    InfraFailed,
    JobState,
    Outcome,
    OutcomeUnknown,
    Rejected,
    RetryBudgetSpent,
    Step,
    SubmitIntended,
    Submitted,
)
from vibesys.states.table import TRANSITIONS


def expected_next() -> dict[tuple[JobState, str], JobState]:
    """(state, trigger) -> state after it, read straight from the table's rows."""
    found: dict[tuple[JobState, str], JobState] = {}
    for row in TRANSITIONS:
        raw: Any = row["source"]
        sources = [raw] if isinstance(raw, str) else list(raw)
        for source in sources:
            state = JobState(str(source))
            dest = row["dest"]
            found[(state, row["trigger"])] = state if dest is None else JobState(str(dest))
    return found


EXPECTED = expected_next()

#: One fixed example of every event type.
SAMPLES: dict[str, Event] = {
    "SubmitIntended": SubmitIntended(attempt=2, job_name="vibesys-abc123-2"),
    "Submitted": Submitted(job_id="4242", observation="Submitted batch job 4242"),
    "Rejected": Rejected(reason="sbatch: error: invalid partition"),
    "OutcomeUnknown": OutcomeUnknown(observation="ssh: connection timed out"),
    "Finished": Finished(FailureClass.APPLICATION_FAILED, 3, "exit 3"),
    "InfraFailed": InfraFailed(FailureClass.NODE_FAILED, "NODE_FAIL", "2030-01-01T00:01:00+00:00"),
    "Collected": Collected(Outcome.APPLICATION_FAILED, 3, "logs home"),
    "RetryBudgetSpent": RetryBudgetSpent(FailureClass.PREEMPTED, retries=2),
    "CancelRequested": CancelRequested(by="user@host"),
    "Cancelled": Cancelled(observation="scancel: job 4242 cancelled"),
}
assert set(SAMPLES) == {cls.__name__ for cls in EVENT_TYPES}

# -- strategies -------------------------------------------------------------------------------

text = st.text(max_size=40)
exit_codes = st.none() | st.integers(min_value=-(2**31), max_value=2**31)
failure_classes = st.sampled_from(FailureClass)

BY_NAME: dict[str, st.SearchStrategy[Any]] = {
    "SubmitIntended": st.builds(
        SubmitIntended, attempt=st.integers(min_value=1, max_value=10**6), job_name=text
    ),
    "Submitted": st.builds(Submitted, job_id=text, observation=text),
    "Rejected": st.builds(Rejected, reason=text),
    "OutcomeUnknown": st.builds(OutcomeUnknown, observation=text),
    "Finished": st.builds(
        Finished,
        failure_class=st.sampled_from(sorted(OUTCOME_OF)),
        exit_code=exit_codes,
        observation=text,
    ),
    "InfraFailed": st.builds(
        InfraFailed,
        failure_class=st.sampled_from(sorted(RETRYABLE)),
        observation=text,
        not_before=text,
    ),
    "Collected": st.builds(
        Collected, outcome=st.sampled_from(Outcome), exit_code=exit_codes, observation=text
    ),
    "RetryBudgetSpent": st.builds(
        RetryBudgetSpent, failure_class=failure_classes, retries=st.integers(0, 100)
    ),
    "CancelRequested": st.builds(CancelRequested, by=text),
    "Cancelled": st.builds(Cancelled, observation=text),
}
assert set(BY_NAME) == set(SAMPLES)

#: Any event of any type, with arbitrary evidence.
events: st.SearchStrategy[Event] = st.one_of(*BY_NAME.values())


@st.composite
def valid_paths(draw: st.DrawFn, max_steps: int = 15) -> tuple[list[Step], JobState]:
    """A history the table allows, from PREPARED, and the state it ends in."""
    state, steps = INITIAL, []
    for seq in range(1, draw(st.integers(0, max_steps)) + 1):
        allowed = sorted(trigger for (src, trigger) in EXPECTED if src == state)
        if not allowed:
            break
        trigger = draw(st.sampled_from(allowed))
        dest = EXPECTED[(state, trigger)]
        steps.append(Step(seq, state, dest, draw(BY_NAME[trigger])))
        state = dest
    return steps, state
