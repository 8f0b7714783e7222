"""What an effect showed, as plain facts: `execute` returns one and the planner
(`plan.proven`) maps it to the event to commit. Pure data."""

from __future__ import annotations

from msgspec import Struct

__all__ = ["ClaimRead", "ErrorFacts", "Fact", "Gathered", "Receipt", "SubmitFailed"]


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
