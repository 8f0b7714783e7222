"""Effects: what the engine must do after a transition is committed (never before).

Submit is the only effect that is never repeated: a second submit could run the command twice.
Every other effect is idempotent, so the engine may carry it out again after a crash."""

from __future__ import annotations

from msgspec import Struct

from vibesys.states.job_state import Outcome


class Submit(Struct, frozen=True):
    attempt: int
    job_name: str


class Fence(Struct, frozen=True):
    """Claim the job's attempt directory for nobody (idempotent): whoever claims first wins."""

    attempt: int


class Poll(Struct, frozen=True):
    """Watch the job until it reaches a terminal state."""


class Cancel(Struct, frozen=True):
    """Ask the adapter to cancel the job, then wait until it has settled."""


class Collect(Struct, frozen=True):
    """Bring logs and results home."""


class ScheduleRetry(Struct, frozen=True):
    not_before: str


class Resolve(Struct, frozen=True):
    """Look the job up again later; nothing is known for sure."""


class Finish(Struct, frozen=True):
    outcome: Outcome
    exit_code: int | None


Effect = Submit | Fence | Poll | Cancel | Collect | ScheduleRetry | Resolve | Finish
