"""What an effect showed, as plain facts: `execute` returns one and the planner
(`plan.proven`) maps it to the event to commit. Pure data."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ClaimRead", "ErrorFacts", "Fact", "Gathered", "Receipt", "SubmitFailed"]


@dataclass(frozen=True, slots=True)
class ErrorFacts:
    """What an error proves, in the two words the engine decides by."""

    maybe_submitted: bool
    retryable: bool
    rejected: bool
    reason: str
    fix: str


@dataclass(frozen=True, slots=True)
class Receipt:
    """The scheduler accepted the submit."""

    job_id: str
    observation: str


@dataclass(frozen=True, slots=True)
class SubmitFailed:
    """The submit raised: what the error proves."""

    facts: ErrorFacts


@dataclass(frozen=True, slots=True)
class ClaimRead:
    """The fence's answer: the claim the attempt's run directory holds now (the fence, or the
    job's own claim that came first)."""

    fenced: bool
    #: the job the claim names (when the job claimed first)
    job_id: str
    description: str


@dataclass(frozen=True, slots=True)
class Gathered:
    """Logs and artifacts are home; what the collection showed."""

    evidence: str


Fact = Receipt | SubmitFailed | ClaimRead | Gathered
