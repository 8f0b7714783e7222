"""What the planner reads of an observation, and of what an effect showed: our vocabulary,
not a scheduler's (pure data). `execute` returns a `Fact` and the planner (`plan.proven`) maps
it to the event to commit.

`engine/observe.py` is the one place where an adapter's RemoteStatus (or the error that kept us
from getting one) becomes a `Seen`; the planner (`engine/plan.py`) decides from it.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from msgspec import Struct

from vibesys.journal_schema import ArtifactState
from vibesys.journal_schema.polls import Observed, Settle
from vibesys.states import FailureClass


class Sight(StrEnum):
    """What an observation shows of the current attempt."""

    STARTING = "starting"  # a launch is under way and has not claimed its attempt yet
    QUEUED = "queued"  # the scheduler holds the job, not yet running
    RUNNING = "running"
    ENDED = "ended"  # terminal; `failure_class` (and `exit_code`) say how
    #: the scheduler ended the job before it started: the job it waited on failed
    UNSATISFIABLE = "unsatisfiable"
    FENCED = "fenced"  # the attempt's claim is a fence: its command can never run
    CLAIMED = "claimed"  # the job claimed its attempt; nobody can say how it ended
    ABSENT = "absent"  # the scheduler answered and knows no such job: silence, not proof
    UNKNOWN = "unknown"  # the adapter cannot tell (yet)
    UNREACHABLE = "unreachable"  # the status call failed; trying again may help
    BLOCKED = "blocked"  # the status call failed; a person must act first (`fix`)


class Seen(Struct, frozen=True):
    sight: Sight
    evidence: str
    job_id: str | None = None
    failure_class: FailureClass | None = None
    exit_code: int | None = None
    #: what a person must do (BLOCKED; UNREACHABLE because the site refused our login: the
    #: credential's renewal)
    fix: str = ""
    #: waiting cannot change this observation (a claimed job whose process and marker are gone)
    final: bool = False
    #: UNREACHABLE: since when the adapter has been failing (set by whoever keeps watching)
    since: datetime | None = None
    #: for people only (the live status line), never decided by: the scheduler's reason for
    #: a waiting job, its partition and nodes
    reason: str | None = None
    partition: str | None = None
    nodes: str | None = None
    #: ENDED cancelled before it started, by no one the scheduler names (no uid, not vibesys):
    #: how sacct keeps Slurm's own kill of a job whose dependency failed once squeue has
    #: forgotten the reason it gave (`DependencyNeverSatisfied`). Last: a recorded Seen is
    #: positional, and those recorded before it still decode.
    unnamed_cancel: bool = False

    @property
    def named(self) -> str:
        """The sight as reports name it: an UNREACHABLE with a fix is a refused login (a
        credential to renew), never called an outage."""
        if self.sight is Sight.UNREACHABLE and self.fix:
            return "login refused"
        return str(self.sight)


# -- what an effect showed ------------------------------------------------------------------


class Deadline(Struct, frozen=True):
    """When an invocation's timeout is over, and the `by` its cancel is recorded with."""

    at: datetime
    by: str

    def left(self, now: datetime) -> float:
        return (self.at - now).total_seconds()


class Carried(Struct, frozen=True):
    """A `CarryOn` carried out: the other invocation's steps taken, or why they stopped."""

    failed: Exception | None = None
    #: its deadline had passed: its cancel was sent (its end is seen soon after)
    timed_out: bool = False
    #: the deadline recorded with it, if any
    deadline: Deadline | None = None


class ErrorFacts(Struct, frozen=True):
    """What an error proves, in the two words the engine decides by."""

    maybe_submitted: bool
    retryable: bool
    rejected: bool
    reason: str
    fix: str


class Receipt(Struct, frozen=True):
    """The scheduler accepted the submit."""

    job_id: str
    observation: str


class SubmitFailed(Struct, frozen=True):
    """The submit raised: what the error proves."""

    facts: ErrorFacts


class ClaimRead(Struct, frozen=True):
    """The fence's answer: the claim the job's attempt directory holds now (the fence, or the
    job's own claim that came first)."""

    fenced: bool
    #: the job the claim names (when the job claimed first)
    job_id: str
    description: str
    #: the claim file's text as read, recorded with the attempt before the event is committed
    claim: str = ""


class Gathered(Struct, frozen=True):
    """Logs and artifacts are home; what the collection showed."""

    evidence: str


Fact = Receipt | SubmitFailed | ClaimRead | Gathered


# -- what an effect brought home on the way (recorded as it comes, before the effect goes on) --


class LogsHome(Struct, frozen=True):
    """A stream's new bytes are home and fsynced: the offset to commit."""

    invocation_id: str
    attempt: int
    stream: str
    offset: int
    arrived: int


class ArtifactStep(Struct, frozen=True, kw_only=True):
    """One step of an artifact's collection: listed (before its download), verified,
    acknowledged, refused, missing or mismatched."""

    invocation_id: str
    attempt: int
    path: str
    state: ArtifactState
    size: int | None = None
    sha256: str | None = None
    local_path: str | None = None
    detail: str | None = None


Progressed = LogsHome | ArtifactStep


# -- what a site's shared status round and probe showed (engine/shared_poll.py) --------------


class RoundSeen(Struct, frozen=True):
    """A site's status round: what it observed of each watched invocation that needed an
    observation, the ones it forgets (they need none), and when the next round is due."""

    finished_at: datetime
    due: datetime
    observed: list[Observed]
    forgotten: list[str]


class ProbeSeen(Struct, frozen=True):
    """A probe of the watched jobs' exit markers: when, and the round the ends it found ask
    for (`due`: as soon as the floor allows; `settle`: once the ends found settle), if any."""

    probed_at: datetime
    due: datetime | None = None
    settle: Settle | None = None
