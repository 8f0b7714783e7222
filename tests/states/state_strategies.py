"""Hypothesis strategies and examples for the events of `vibesys.states`, and the hand-written
oracle of the transition table the tests compare the product with (never the product's own
constants, so a change to the table cannot quietly change what the tests expect)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from vibesys.states import (
    EVENT_TYPES,
    INITIAL,
    Cancelled,
    CancelRequested,
    Collected,
    Event,
    FailureClass,
    FenceIntended,
    Finished,
    InfraFailed,
    JobState,
    Misconfigured,
    Outcome,
    OutcomeUnknown,
    ParentAttemptFailed,
    ParentFailed,
    Rejected,
    RetryBudgetSpent,
    SiteReplaced,
    Step,
    SubmitDispatched,
    SubmitIntended,
    Submitted,
)

S = JobState

#: Every (state, trigger) -> state after it, written out by hand from the design (an internal
#: transition stays in its state). An independent oracle: a change to the table must change
#: this list too, deliberately.
EXPECTED: dict[tuple[JobState, str], JobState] = {
    (S.PREPARED, "SubmitIntended"): S.SUBMITTING,
    (S.RETRYING, "SubmitIntended"): S.SUBMITTING,
    (S.SUBMITTING, "SubmitDispatched"): S.SUBMITTING,
    (S.SUBMITTING, "Submitted"): S.RUNNING,
    (S.UNRESOLVED, "Submitted"): S.RUNNING,
    (S.PREPARED, "Rejected"): S.DONE,
    (S.SUBMITTING, "Rejected"): S.DONE,
    (S.PREPARED, "Misconfigured"): S.DONE,
    (S.SUBMITTING, "Misconfigured"): S.DONE,
    (S.PREPARED, "ParentFailed"): S.DONE,
    (S.SUBMITTING, "ParentFailed"): S.DONE,
    (S.RETRYING, "ParentFailed"): S.DONE,
    (S.SUBMITTING, "FenceIntended"): S.SUBMITTING,
    (S.RUNNING, "FenceIntended"): S.RUNNING,
    (S.UNRESOLVED, "FenceIntended"): S.UNRESOLVED,
    (S.SUBMITTING, "ParentAttemptFailed"): S.RETRYING,
    (S.RUNNING, "ParentAttemptFailed"): S.RETRYING,
    (S.UNRESOLVED, "ParentAttemptFailed"): S.RETRYING,
    (S.SUBMITTING, "OutcomeUnknown"): S.UNRESOLVED,
    (S.RUNNING, "OutcomeUnknown"): S.UNRESOLVED,
    (S.RUNNING, "Finished"): S.COLLECTING,
    (S.UNRESOLVED, "Finished"): S.COLLECTING,
    (S.SUBMITTING, "InfraFailed"): S.RETRYING,
    (S.RUNNING, "InfraFailed"): S.RETRYING,
    (S.UNRESOLVED, "InfraFailed"): S.RETRYING,
    (S.COLLECTING, "Collected"): S.DONE,
    (S.RETRYING, "RetryBudgetSpent"): S.DONE,
    (S.SUBMITTING, "CancelRequested"): S.SUBMITTING,
    (S.RUNNING, "CancelRequested"): S.RUNNING,
    (S.UNRESOLVED, "CancelRequested"): S.UNRESOLVED,
    (S.COLLECTING, "CancelRequested"): S.COLLECTING,
    (S.PREPARED, "Cancelled"): S.DONE,
    (S.SUBMITTING, "Cancelled"): S.DONE,
    (S.RUNNING, "Cancelled"): S.DONE,
    (S.COLLECTING, "Cancelled"): S.DONE,
    (S.RETRYING, "Cancelled"): S.DONE,
    (S.UNRESOLVED, "Cancelled"): S.DONE,
    (S.PREPARED, "SiteReplaced"): S.PREPARED,
    (S.SUBMITTING, "SiteReplaced"): S.SUBMITTING,
    (S.RUNNING, "SiteReplaced"): S.RUNNING,
    (S.COLLECTING, "SiteReplaced"): S.COLLECTING,
    (S.RETRYING, "SiteReplaced"): S.RETRYING,
    (S.UNRESOLVED, "SiteReplaced"): S.UNRESOLVED,
}

#: The failure classes after which another attempt may follow (infrastructure, never the
#: command), and the outcome each of the command's own ends leads to. Written out by hand.
RETRYABLE_CLASSES = frozenset(
    {
        FailureClass.ALLOCATION_EXPIRED,
        FailureClass.NODE_FAILED,
        FailureClass.PREEMPTED,
        FailureClass.TRANSPORT_LOST,
    }
)
OUTCOME_OF_CLASS = {
    FailureClass.COMPLETED: Outcome.COMPLETED,
    FailureClass.APPLICATION_FAILED: Outcome.APPLICATION_FAILED,
    FailureClass.CANCELLED: Outcome.CANCELLED,
    FailureClass.DEPENDENCY_FAILED: Outcome.DEPENDENCY_FAILED,
}

#: One fixed example of every event type.
SAMPLES: dict[str, Event] = {
    "SubmitIntended": SubmitIntended(attempt=2, job_name="vibesys-abc123-2"),
    "SubmitDispatched": SubmitDispatched(attempt=2, job_name="vibesys-abc123-2"),
    "Misconfigured": Misconfigured(reason="host key changed", fix="verify it"),
    "ParentFailed": ParentFailed(parent="0a1b2c3d4e5f6789", observation="it ended INFRA_FAILED"),
    "FenceIntended": FenceIntended(attempt=2),
    "ParentAttemptFailed": ParentAttemptFailed(observation="job 41 of 0a1b2c3d4e5f6789 failed"),
    "Submitted": Submitted(job_id="4242", observation="Submitted batch job 4242"),
    "Rejected": Rejected(reason="sbatch: error: invalid partition"),
    "OutcomeUnknown": OutcomeUnknown(observation="ssh: connection timed out"),
    "Finished": Finished(FailureClass.APPLICATION_FAILED, 3, "exit 3"),
    "InfraFailed": InfraFailed(FailureClass.NODE_FAILED, "NODE_FAIL", "2030-01-01T00:01:00+00:00"),
    "Collected": Collected(Outcome.APPLICATION_FAILED, 3, "logs home"),
    "RetryBudgetSpent": RetryBudgetSpent(FailureClass.PREEMPTED, retries=2),
    "CancelRequested": CancelRequested(by="user@host"),
    "Cancelled": Cancelled(observation="scancel: job 4242 cancelled"),
    "SiteReplaced": SiteReplaced("a" * 64, "b" * 64, "/etc/slurm.toml", "slurm.name", "op@host"),
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
    "SubmitDispatched": st.builds(
        SubmitDispatched, attempt=st.integers(min_value=1, max_value=10**6), job_name=text
    ),
    "Misconfigured": st.builds(Misconfigured, reason=text, fix=text),
    "ParentFailed": st.builds(ParentFailed, parent=text, observation=text),
    "FenceIntended": st.builds(FenceIntended, attempt=st.integers(min_value=1, max_value=10**6)),
    "Submitted": st.builds(Submitted, job_id=text, observation=text),
    "Rejected": st.builds(Rejected, reason=text),
    "OutcomeUnknown": st.builds(OutcomeUnknown, observation=text),
    "ParentAttemptFailed": st.builds(ParentAttemptFailed, observation=text),
    "Finished": st.builds(
        Finished,
        failure_class=st.sampled_from(sorted(OUTCOME_OF_CLASS)),
        exit_code=exit_codes,
        observation=text,
    ),
    "InfraFailed": st.builds(
        InfraFailed,
        failure_class=st.sampled_from(sorted(RETRYABLE_CLASSES)),
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
    "SiteReplaced": st.builds(
        SiteReplaced, old_digest=text, new_digest=text, source=text, changed=text, by=text
    ),
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
