"""Effects: what the engine must do after a transition is committed (never before).

Submit is the only effect that is never repeated: a second submit could run the command twice.
Every other effect is idempotent, so the engine may carry it out again after a crash."""

from __future__ import annotations

from dataclasses import dataclass

from vibesys.states.job_state import Outcome


@dataclass(frozen=True, slots=True)
class Submit:
    attempt: int
    job_name: str


@dataclass(frozen=True, slots=True)
class Fence:
    """Claim the attempt's run directory for nobody (idempotent): whoever claims first wins."""

    attempt: int


@dataclass(frozen=True, slots=True)
class Poll:
    """Watch the job until it reaches a terminal state."""


@dataclass(frozen=True, slots=True)
class Cancel:
    """Ask the adapter to cancel the job, then wait until it has settled."""


@dataclass(frozen=True, slots=True)
class Collect:
    """Bring logs and results home."""


@dataclass(frozen=True, slots=True)
class ScheduleRetry:
    not_before: str


@dataclass(frozen=True, slots=True)
class Resolve:
    """Look the job up again later; nothing is known for sure."""


@dataclass(frozen=True, slots=True)
class Finish:
    outcome: Outcome
    exit_code: int | None


Effect = Submit | Fence | Poll | Cancel | Collect | ScheduleRetry | Resolve | Finish
