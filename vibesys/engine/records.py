"""The recorded results of effects and observations that are not transitions, each named for
what it records: the claim a fence read, the outage an observation dates, where an attempt
runs, who drives an invocation (its owner lease), a collection's progress, the status round
shared per site, a cluster lease's own transitions. With `core.py` the only engine code that
writes the journal (tests/engine/test_one_door.py); what to record is decided elsewhere."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from vibesys.adapters.base import JobRef
from vibesys.engine.facts import ClaimRead
from vibesys.engine.outage import OutageWrite, dated, outage_write
from vibesys.engine.provenance import provenance_change
from vibesys.engine.seen import Seen, Sight
from vibesys.journal_schema import ArtifactState, ClusterLease, Invocation, Journal
from vibesys.journal_schema.polls import Observed, PollSite, Settle

if TYPE_CHECKING:
    from vibesys.engine.core import Engine


def record_claim(journal: Journal, inv: Invocation, read: ClaimRead) -> None:
    """Keep the claim the fence read with the current attempt."""
    journal.invocations.record_attempt_detail(inv.id, inv.attempt, claim=read.claim)


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


def record_provenance(engine: Engine, inv: Invocation, provenance: Mapping[str, str]) -> None:
    """Merge `provenance` into the current attempt's record when it adds or changes a value
    (the start, then the end, ...); silent otherwise."""
    fresh = provenance_change(engine, inv, provenance)
    if fresh is not None:
        engine.journal.invocations.record_attempt_detail(inv.id, inv.attempt, provenance=fresh)
        key = (inv.id, inv.attempt)
        engine.provenance_seen[key] = {**engine.provenance_seen.get(key, {}), **fresh}


# -- an invocation's owner lease: who drives it now -------------------------------------------


def take_owner_lease(journal: Journal, invocation_id: str, owner: str, ttl: timedelta) -> bool:
    """Lease `invocation_id` to `owner` (or renew it); False while another live process has it."""
    return journal.leases.acquire_lease(invocation_id, owner, ttl)


def take_owner_leases(
    journal: Journal, invocation_ids: list[str], owner: str, ttl: timedelta
) -> set[str]:
    """`take_owner_lease` for many in one transaction; the ids taken."""
    return journal.leases.acquire_leases(invocation_ids, owner, ttl)


def give_back_owner_lease(journal: Journal, invocation_id: str, owner: str) -> None:
    journal.leases.release_lease(invocation_id, owner)


def give_back_owner_leases(journal: Journal, invocation_ids: list[str], owner: str) -> None:
    journal.leases.release_leases(invocation_ids, owner)


# -- a collection's progress, recorded as it goes so that a restart resumes it ---------------


def record_spool_offset(journal: Journal, job: JobRef, stream: str, offset: int) -> None:
    """The bytes of `stream` that are home, appended and synced, for the job's attempt."""
    journal.progress.commit_spool_offset(job.invocation_id, job.attempt, stream, offset)


def record_artifact_state(
    journal: Journal,
    job: JobRef,
    path: str,
    state: ArtifactState,
    *,
    size: int | None = None,
    sha256: str | None = None,
    local_path: str | None = None,
    detail: str | None = None,
) -> None:
    """Where the artifact `path` of the job's attempt is on its way home."""
    journal.progress.record_artifact(
        job.invocation_id,
        job.attempt,
        path,
        state,
        size=size,
        sha256=sha256,
        local_path=local_path,
        detail=detail,
    )


# -- the status round shared per site: its watch list, poller lease and schedule -------------


def watch_jobs(
    journal: Journal,
    site: str,
    invocation_ids: Sequence[str],
    *,
    now: datetime | None = None,
    hold_until: datetime | None = None,
) -> None:
    """Put the invocations on the site's watch list (a round at once unless `hold_until`)."""
    journal.polls.watch(site, invocation_ids, now=now, hold_until=hold_until)


def take_poller(
    journal: Journal,
    site: str,
    owner: str,
    ttl: timedelta,
    now: datetime,
    *,
    after_round: int,
    force: bool = False,
    probe: bool = False,
) -> PollSite | None:
    """The site's poller lease for the next round (or a probe), if it is free and due."""
    return journal.polls.take_poller(
        site, owner, ttl, now, after_round=after_round, force=force, probe=probe
    )


def record_round(
    journal: Journal,
    site: str,
    owner: str,
    now: datetime,
    due_at: datetime,
    observed: Sequence[Observed],
    forget: Sequence[str] = (),
) -> int | None:
    """The round's observations, its next due time, the poller lease given back."""
    return journal.polls.finish_round(site, owner, now, due_at, observed, forget)


def give_back_poller(
    journal: Journal,
    site: str,
    owner: str,
    *,
    probed_at: datetime | None = None,
    due_at: datetime | None = None,
    settle: Settle | None = None,
) -> None:
    journal.polls.release_poller(site, owner, probed_at=probed_at, due_at=due_at, settle=settle)


def bring_round_forward(journal: Journal, site: str, due_at: datetime) -> None:
    """The site's next round no later than `due_at` (a cancel to see through)."""
    journal.polls.advance_due(site, due_at)


def record_site_facts(journal: Journal, site: str, facts: dict[str, str]) -> None:
    journal.polls.record_site_facts(site, facts)


# -- a cluster lease's own transitions, around the effects they authorize ---------------------


def record_cluster_reuse(
    journal: Journal, facts: dict[str, Any], allocation: Sequence[str], evidence: str
) -> ClusterLease:
    """The campaign's cluster, found up and fitting, reused (adopted when nobody recorded it)."""
    return journal.clusters.record_reuse(**facts, allocation=allocation, evidence=evidence)


def record_launch_intent(
    journal: Journal, facts: dict[str, Any], reason: str, owner: str
) -> ClusterLease:
    """The intent to launch the campaign's cluster, committed before the launch."""
    return journal.clusters.intend_launch(**facts, reason=reason, owner=owner)


def record_launched(
    journal: Journal, lease_id: int, allocation: Sequence[str], evidence: str
) -> ClusterLease:

    return journal.clusters.record_launched(lease_id, allocation, evidence)


def record_launch_failed(journal: Journal, lease_id: int, evidence: str) -> ClusterLease:
    return journal.clusters.record_launch_failed(lease_id, evidence)


def record_cluster_use(journal: Journal, lease_id: int, inv: Invocation) -> None:
    """The current attempt of `inv` runs on the lease's cluster (refused once a release is
    intended)."""
    journal.clusters.record_lease_use(lease_id, inv.id, inv.attempt)


def note_cluster(journal: Journal, lease_id: int, text: str) -> ClusterLease:
    return journal.clusters.note_lease(lease_id, text)


def record_release_intent(journal: Journal, lease_id: int, owner: str, reason: str) -> ClusterLease:
    """The intent to release, committed before the release (refused while the cluster serves
    an invocation that is not DONE)."""
    return journal.clusters.intend_release(lease_id, owner, reason)


def record_cluster_released(journal: Journal, lease_id: int, evidence: str) -> ClusterLease:
    return journal.clusters.record_released(lease_id, evidence)
