"""Named failpoints for crash tests.

`VIBESYS_FAILPOINTS=name[,name...]` makes the process exit at once, with status 137 and no
cleanup (`os._exit`), when it reaches one of those points: as if it had been SIGKILLed there.
There is one after every commit and before its effect, and one after every effect and before
the next commit.
"""

from __future__ import annotations

import os
from typing import Final

ENV = "VIBESYS_FAILPOINTS"
CRASH_STATUS = 137

FAILPOINTS: Final[dict[str, str]] = {
    "after_key_commit": "a client's idempotency key is committed; its invocation not yet recorded",
    "after_prepare_commit": "PREPARED is committed; nothing submitted yet",
    "after_submit_intent": "SUBMITTING (attempt, job name) is committed; nothing dispatched yet",
    "after_submit_dispatch": "SubmitDispatched is committed; the submit may begin, not yet called",
    "after_submit_effect": "the job was submitted; its id is not yet committed",
    "after_fence_intent": "FenceIntended is committed; the fence is not yet written",
    "after_fence_effect": "the fence was written (or the job's claim found); not yet committed",
    "after_submitted_commit": "RUNNING (job id) is committed; not yet polled",
    "after_terminal_observed": "the job's end was observed; not yet committed",
    "after_finished_commit": "COLLECTING is committed; nothing collected yet",
    "after_collect_effect": "logs and results are home; DONE not yet committed",
    "after_done_commit": "DONE is committed; the run has not yet reported",
    "after_infra_failed_commit": "RETRYING is committed; the next attempt is not yet intended",
    "after_cancel_intent": "the cancel request is committed; the cancel not yet sent",
    "after_cancel_effect": "the cancel was sent; its settlement not yet committed",
    "after_unknown_commit": "UNRESOLVED is committed",
    "after_spool_append": "log bytes are appended and fsynced; their offset not committed",
    "after_artifact_download": "an artifact is downloaded and verified; not yet recorded",
    "after_launch_intent": "the cluster launch is intended (lease launching); not yet launched",
    "after_launch_effect": "the cluster is launched; its allocation not yet recorded",
    "after_release_intent": "the cluster release is intended (lease releasing); not yet released",
    "after_release_effect": "the cluster is released (sky down); not yet recorded",
}


def failpoint(name: str) -> None:
    """Crash here if the environment names this point."""
    if name not in FAILPOINTS:
        raise KeyError(f"unknown failpoint {name}")
    armed = os.environ.get(ENV)
    if armed and name in armed.split(","):
        os._exit(CRASH_STATUS)


def validate(names: str) -> list[str]:
    """Unknown names in a VIBESYS_FAILPOINTS value (empty when all are known)."""
    return [n for n in names.split(",") if n and n not in FAILPOINTS]


#: The failpoint after each committed event (by event class name).
AFTER_COMMIT = {
    "SubmitIntended": "after_submit_intent",
    "SubmitDispatched": "after_submit_dispatch",
    "Submitted": "after_submitted_commit",
    "FenceIntended": "after_fence_intent",
    "Finished": "after_finished_commit",
    "InfraFailed": "after_infra_failed_commit",
    "CancelRequested": "after_cancel_intent",
    "OutcomeUnknown": "after_unknown_commit",
}


def after_commit(event: str, done: bool) -> None:
    """Cross the failpoint after a committed event (`event`, its class name): its own, else
    the one after DONE when it ended the invocation."""
    point = AFTER_COMMIT.get(event)
    if point is None and done:
        point = "after_done_commit"
    if point is not None:
        failpoint(point)
