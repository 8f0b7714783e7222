"""The recorded results of observations and effects that are not job transitions: the outage
an observation dates, where an attempt runs, what a collection brings home on the way, what a
site's shared status round and probe showed, and a cluster lease's transitions (the lease
table's choice committed, what its launch or release left). `tests/engine/test_one_door.py`
holds the engine's journal writes to this module and core.py.

How long a scheduler has been unreachable counts from the first unreachable observation of the
current attempt recorded in the journal (`attempts.unreachable_since`), whichever process made
it: repeated `reconcile` runs, a `wait`, a takeover all count from the same moment, so none
gives up before the time is spent and none waits longer. Any observation that reaches the
scheduler ends the outage; the next one counts afresh.

Where and on what each attempt ran, for every adapter: the adapters put it in every status
(`RemoteStatus.provenance`: a Slurm site, partition, nodes and TRES with the start and end the
scheduler reports; a SkyPilot cluster, its allocation and profile), and this is the one place
that decides what of it is new and records that with the attempt.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from msgspec import structs

from vibesys.adapters.leases import LeasePlan
from vibesys.engine.seen import (
    ArtifactStep,
    LogsHome,
    ProbeSeen,
    Progressed,
    RoundSeen,
    Seen,
    Sight,
)
from vibesys.journal_schema import ClusterLease, Invocation, Journal
from vibesys.states.lease_table import LeaseChoice, LeaseDecision, LeaseOutcome

if TYPE_CHECKING:
    from vibesys.engine.core import Engine

__all__ = [
    "OutageWrite",
    "commit_lease_choice",
    "commit_release_intent",
    "date_outage",
    "dated",
    "known_provenance",
    "outage_write",
    "provenance_change",
    "record_lease_outcome",
    "record_lease_use",
    "record_probe",
    "record_provenance",
    "record_round",
    "record_site_facts",
    "record_step",
]


class OutageWrite(StrEnum):
    """What an observation changes in the attempt's outage record."""

    MARK = "mark"  # the first unreachable observation: the outage begins now
    CLEAR = "clear"  # the scheduler answered: the outage is over


def outage_write(recorded: datetime | None, seen: Seen) -> OutageWrite | None:
    """What to record of `seen`, given the outage recorded so far (None: nothing)."""
    if seen.sight is not Sight.UNREACHABLE:
        if recorded is not None:
            return OutageWrite.CLEAR
        return None
    return OutageWrite.MARK if recorded is None else None


def dated(seen: Seen, recorded: datetime) -> Seen:
    """An UNREACHABLE `seen`, dated from the outage's first recorded observation."""
    return structs.replace(seen, since=min(recorded, seen.since or recorded))


def date_outage(journal: Journal, now: datetime, inv: Invocation, seen: Seen) -> Seen:
    """`seen`, an UNREACHABLE one dated from the outage's first recorded observation (recorded
    now when this is the first); any other observation clears the record."""
    records = journal.invocations
    recorded = records.unreachable_since(inv.id, inv.attempt)
    match outage_write(recorded, seen):
        case OutageWrite.CLEAR:
            records.clear_unreachable(inv.id, inv.attempt)
        case OutageWrite.MARK:
            recorded = records.mark_unreachable(inv.id, inv.attempt, seen.since or now)
    return dated(seen, recorded) if seen.sight is Sight.UNREACHABLE and recorded else seen


def known_provenance(engine: Engine, inv: Invocation) -> dict[str, str]:
    """The current attempt's provenance as recorded (read once per process and attempt)."""
    key = (inv.id, inv.attempt)
    known = engine.provenance_seen.get(key)
    if known is None:
        recorded = [
            a for a in engine.journal.invocations.attempts(inv.id) if a.attempt == inv.attempt
        ]
        known = {k: str(v) for k, v in recorded[0].provenance.items()} if recorded else {}
        engine.provenance_seen[key] = known
    return known


def provenance_change(
    engine: Engine, inv: Invocation, provenance: Mapping[str, str]
) -> dict[str, str] | None:
    """`provenance`, when it adds or changes a value of the current attempt's record (the
    engine records it); None when there is nothing to record."""
    if inv.attempt < 1:
        return None
    known = known_provenance(engine, inv)
    fresh = dict(provenance)
    if any(known.get(name) != value for name, value in fresh.items()):
        return fresh
    return None


def record_provenance(engine: Engine, inv: Invocation, provenance: Mapping[str, str]) -> None:
    """Merge `provenance` into the current attempt's record when it adds or changes a value
    (the start, then the end, ...); silent otherwise."""
    fresh = provenance_change(engine, inv, provenance)
    if fresh is not None:
        engine.journal.invocations.record_attempt_detail(inv.id, inv.attempt, provenance=fresh)
        key = (inv.id, inv.attempt)
        engine.provenance_seen[key] = {**engine.provenance_seen.get(key, {}), **fresh}


def record_step(journal: Journal, step: Progressed) -> None:
    """One step an effect brought home (a stream's new offset, an artifact's state), recorded
    before the effect goes on: a crash after it finds it recorded."""
    match step:
        case LogsHome(invocation_id=invocation_id, attempt=attempt):
            journal.progress.commit_spool_offset(invocation_id, attempt, step.stream, step.offset)
        case ArtifactStep(invocation_id=invocation_id, attempt=attempt):
            journal.progress.record_artifact(
                invocation_id,
                attempt,
                step.path,
                step.state,
                size=step.size,
                sha256=step.sha256,
                local_path=step.local_path,
                detail=step.detail,
            )


# -- cluster leases ---------------------------------------------------------------------------


def commit_lease_choice(
    journal: Journal, owner: str, inv: Invocation, plan: LeasePlan, decision: LeaseDecision
) -> ClusterLease:
    """The lease table's choice for `inv`'s attempt (`decide_lease`), committed: the reuse
    recorded, or the launch intended (before the launch effect). A refusal is no record."""
    assert decision.choice is not LeaseChoice.REFUSE, decision
    facts: dict[str, Any] = {
        "name": plan.cluster,
        "campaign": plan.campaign,
        "fingerprint": plan.fingerprint,
        "profile": plan.profile,
        "adapter": inv.adapter,
        "request": inv.recorded_request,
        "site_digest": inv.site_digest,
    }
    if decision.choice is LeaseChoice.REUSE:
        return journal.clusters.record_reuse(
            **facts, allocation=plan.allocation, evidence=plan.reason
        )
    return journal.clusters.intend_launch(**facts, reason=plan.reason, owner=owner)


def record_lease_use(journal: Journal, lease: ClusterLease, inv: Invocation) -> None:
    """That `inv`'s attempt runs on the lease, before it is submitted there."""
    journal.clusters.record_lease_use(lease.id, inv.id, inv.attempt)


def commit_release_intent(journal: Journal, lease_id: int, owner: str, reason: str) -> ClusterLease:
    """The intent to release, before the release effect (refused while the lease serves an
    invocation that is not DONE)."""
    return journal.clusters.intend_release(lease_id, owner, reason)


def record_lease_outcome(
    journal: Journal,
    lease_id: int,
    outcome: LeaseOutcome,
    evidence: str,
    allocation: tuple[str, ...] = (),
) -> ClusterLease:
    """What a launch or release left (or a refreshed inspection found it left), recorded."""
    match outcome:
        case LeaseOutcome.UP:
            return journal.clusters.record_launched(lease_id, allocation, evidence)
        case LeaseOutcome.LAUNCH_FAILED:
            return journal.clusters.record_launch_failed(lease_id, evidence)
        case LeaseOutcome.RELEASED:
            return journal.clusters.record_released(lease_id, evidence)
        case LeaseOutcome.NOTED:
            return journal.clusters.note_lease(lease_id, evidence)
    raise AssertionError(f"{outcome} is an effect to carry out, not a record")


# -- a site's shared status rounds (engine/shared_poll.py) --------------------------------------


def record_round(journal: Journal, site: str, owner: str, seen: RoundSeen) -> int | None:
    """What the round observed, stored for every process, with the next round's due time;
    the poller lease is given back. The new round's number, or None when the lease was lost
    meanwhile (nothing is stored then)."""
    return journal.polls.finish_round(
        site, owner, seen.finished_at, seen.due, seen.observed, seen.forgotten
    )


def record_probe(journal: Journal, site: str, owner: str, seen: ProbeSeen) -> None:
    """When the probe ran and the round its ends ask for; the poller lease is given back."""
    journal.polls.release_poller(
        site, owner, probed_at=seen.probed_at, due_at=seen.due, settle=seen.settle
    )


def record_site_facts(journal: Journal, site: str, facts: dict[str, str]) -> None:
    """The site's facts (its RPC rate limit), asked once by a poller, kept for all."""
    journal.polls.record_site_facts(site, facts)
