"""The exit statuses of `vibesys run`, `wait`, `reconcile` and of a command the CLI refuses,
and the one mapping from how an invocation ended to its status. Pure: below the CLI, so the
broker and the bridge give the same statuses without importing it."""

from __future__ import annotations

from typing import Protocol

from vibesys.errors import EXIT_BAD_INPUT as EXIT_BAD_INPUT  # the boundary's, defined below
from vibesys.errors import EXIT_JOURNAL_FAULT as EXIT_JOURNAL_FAULT
from vibesys.states.job_state import JobState, Outcome


class Ended(Protocol):
    """What the exit status is read from (an invocation's record)."""

    @property
    def state(self) -> JobState: ...
    @property
    def outcome(self) -> Outcome | None: ...
    @property
    def exit_code(self) -> int | None: ...


#: Exit statuses of `run` and `wait` besides the command's own.
EXIT_INFRA_FAILED = 75  # EX_TEMPFAIL: infrastructure failures spent the retry budget
EXIT_MISCONFIGURED = 78  # EX_CONFIG: a configuration or security failure; a person must act
EXIT_OUTPUT_FAILED = 74  # EX_IOERR: our own output broke (EPIPE, ENOSPC); the job was cancelled
EXIT_UNRESOLVED = 4
EXIT_INTERRUPTED = 130
#: as `timeout(1)`'s: the evaluation's own timeout ended it (the bridge, the GPU broker)
EXIT_TIMEOUT = 124
#: EX_NOINPUT: the invocation it runs after (`--after`) did not succeed; its command never ran
EXIT_DEPENDENCY_FAILED = 66
#: `reconcile` only (EX_UNAVAILABLE): an invocation is left as it is because its scheduler is
#: unreachable, within the unreachable timeout recorded with it; run it again later
EXIT_WAITING = 69


def exit_status(inv: Ended, timed_out: bool = False) -> int:
    """The contract of `vibesys run` and `vibesys wait`; `timed_out`: the invocation's cancel
    was its timeout's (`states.events.timed_out`), which exits as `timeout(1)` does."""
    if inv.state in (JobState.UNRESOLVED, JobState.COLLECTING):
        return EXIT_UNRESOLVED
    if inv.state is not JobState.DONE:
        return 0  # detached: the job is running
    match inv.outcome:
        case Outcome.COMPLETED:
            return 0
        case Outcome.APPLICATION_FAILED:
            return inv.exit_code if inv.exit_code not in (None, 0) else 1
        case Outcome.INFRA_FAILED:
            return EXIT_INFRA_FAILED
        case Outcome.CANCELLED:
            return EXIT_TIMEOUT if timed_out else EXIT_INTERRUPTED
        case Outcome.REJECTED:
            return EXIT_BAD_INPUT
        case Outcome.MISCONFIGURED:
            return EXIT_MISCONFIGURED
        case Outcome.DEPENDENCY_FAILED:
            return EXIT_DEPENDENCY_FAILED
    return 1
