"""The one transition table. Everything else (the machine, the journal's compare-and-swap,
`journal verify`, the diagrams in docs/) is derived from this data; nothing else adds an edge.

Each row's `after` names the effect the engine must carry out once the transition is committed.
A row with `dest: None` is internal: the state does not change, but the history records the
event and its effect is authorized (a dispatch, a fence, a cancellation).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from vibesys.states.job_state import JobState
from vibesys.states.job_state import JobState as S

if TYPE_CHECKING:
    from transitions.core import TransitionConfigDict

NON_TERMINAL: Final = [S.PREPARED, S.SUBMITTING, S.RUNNING, S.COLLECTING, S.RETRYING, S.UNRESOLVED]

TRANSITIONS: Final[list[TransitionConfigDict]] = [
    # First attempt, and every later one once its backoff has passed: the stable job name is
    # recorded, nothing is sent yet (a crash here proves nothing was submitted).
    {"trigger": "SubmitIntended", "source": [S.PREPARED, S.RETRYING], "dest": S.SUBMITTING},
    # The submission may begin. Committed by exactly one process (compare-and-swap), so a
    # stalled driver that wakes up later can never submit the same attempt again.
    {"trigger": "SubmitDispatched", "source": S.SUBMITTING, "dest": None, "after": "emit_submit"},
    # The scheduler accepted the job, or a lookup by stable name (or the job's claim) found it.
    {
        "trigger": "Submitted",
        "source": [S.SUBMITTING, S.UNRESOLVED],
        "dest": S.RUNNING,
        "after": "emit_poll",
    },
    # The request itself is invalid: nothing was or will be submitted.
    {
        "trigger": "Rejected",
        "source": [S.PREPARED, S.SUBMITTING],
        "dest": S.DONE,
        "after": "emit_finish",
    },
    # A configuration or security failure: nothing was submitted and retrying cannot help.
    {
        "trigger": "Misconfigured",
        "source": [S.PREPARED, S.SUBMITTING],
        "dest": S.DONE,
        "after": "emit_finish",
    },
    # The invocation it runs after ended without success before anything was submitted.
    {
        "trigger": "ParentFailed",
        "source": [S.PREPARED, S.SUBMITTING, S.RETRYING],
        "dest": S.DONE,
        "after": "emit_finish",
    },
    # Silence is not absence: an attempt whose job nobody can see is retired only by a fence.
    # (RUNNING: a job the scheduler ended before its start, its dependency never satisfied.)
    {
        "trigger": "FenceIntended",
        "source": [S.SUBMITTING, S.RUNNING, S.UNRESOLVED],
        "dest": None,
        "after": "emit_fence",
    },
    # A chained attempt that never ran because the parent's job it waited on failed: it waits
    # for the parent's next attempt without spending a retry (nothing to schedule: the
    # parent's new job, not a backoff, decides when it goes again).
    {
        "trigger": "ParentAttemptFailed",
        "source": [S.SUBMITTING, S.RUNNING, S.UNRESOLVED],
        "dest": S.RETRYING,
    },
    # Nobody can say whether the job exists or how it ended.
    {
        "trigger": "OutcomeUnknown",
        "source": [S.SUBMITTING, S.RUNNING],
        "dest": S.UNRESOLVED,
        "after": "emit_resolve",
    },
    # The job reached a terminal state (success, its own failure, or a cancellation).
    {
        "trigger": "Finished",
        "source": [S.RUNNING, S.UNRESOLVED],
        "dest": S.COLLECTING,
        "after": "emit_collect",
    },
    # Infrastructure failure, proven to leave nothing of the attempt running (a terminal
    # scheduler state, an error that proves nothing was submitted, or a fence that won).
    {
        "trigger": "InfraFailed",
        "source": [S.SUBMITTING, S.RUNNING, S.UNRESOLVED],
        "dest": S.RETRYING,
        "after": "emit_retry",
    },
    {"trigger": "Collected", "source": S.COLLECTING, "dest": S.DONE, "after": "emit_finish"},
    {"trigger": "RetryBudgetSpent", "source": S.RETRYING, "dest": S.DONE, "after": "emit_finish"},
    # Cancellation: first the committed intent (authorizes the cancel effect) ...
    {
        "trigger": "CancelRequested",
        "source": [S.SUBMITTING, S.RUNNING, S.UNRESOLVED, S.COLLECTING],
        "dest": None,
        "after": "emit_cancel",
    },
    # ... then the settled fact, proven: nothing of the invocation runs any more. PREPARED and
    # RETRYING have nothing running, so they go at once. (COLLECTING keeps this edge so that
    # older journals replay; a cancel during collection now keeps the proven outcome.)
    {"trigger": "Cancelled", "source": NON_TERMINAL, "dest": S.DONE, "after": "emit_finish"},
    # An operator's explicit replacement of the recorded site configuration: recorded with its
    # evidence, nothing else changes (the next adapter built uses the new rendering).
    {"trigger": "SiteReplaced", "source": NON_TERMINAL, "dest": None},
]


def sources_of(row: Mapping[str, Any]) -> list[JobState]:
    """A row's source states as a list, whether it names one or several."""
    sources = row["source"]
    return [S(sources)] if isinstance(sources, str) else [S(s) for s in sources]


def dest_of(row: Mapping[str, Any]) -> JobState | None:
    return None if row["dest"] is None else S(row["dest"])
