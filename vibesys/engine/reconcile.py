"""`vibesys reconcile`: bring every unfinished invocation in line with what the adapters show.

Cluster leases come first: a launch or release a crash interrupted is settled from what the
control plane shows (`engine.clusters`). Invocations with a live lease belong to the process
holding it and are left alone. For each of the others the job is looked up (one batched status
call per adapter and site) and the planner decides, exactly as for a running driver: reattach,
collect, fence, retry or mark UNRESOLVED (the table is in docs/architecture.md, generated from
the planner). Nothing is written when
nothing changed, so running it twice changes nothing. A failure inside one invocation is
reported on its row and never stops the others from being reconciled.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from msgspec import Struct

from vibesys.adapters.base import JobRef
from vibesys.engine.clusters import release_finished_campaigns, settle_leases
from vibesys.engine.core import Engine, overdue
from vibesys.engine.execute import error_facts
from vibesys.engine.observation import seen_of
from vibesys.engine.observe import seen_error
from vibesys.engine.plan import needs_observation, orphaned
from vibesys.engine.seen import Seen, Sight
from vibesys.errors import BackendError
from vibesys.journal_schema import Invocation, LeaseState, iso
from vibesys.states import JobState


class ReconcileRow(Struct, frozen=True):
    #: an invocation id, or "cluster NAME" for a cluster lease
    invocation_id: str
    before: JobState | LeaseState
    after: JobState | LeaseState
    evidence: str
    failed: bool = False
    #: left as it is: its scheduler is unreachable, within the timeout recorded with it (the
    #: time it ends); a later reconcile decides
    waiting_until: str | None = None

    @property
    def waiting(self) -> bool:
        return self.waiting_until is not None

    def to_json(self) -> dict[str, str | bool | None]:
        return {
            "invocation": self.invocation_id,
            "before": self.before,
            "after": self.after,
            "evidence": self.evidence,
            "failed": self.failed,
            "waiting_until": self.waiting_until,
        }


def reconcile(engine: Engine) -> list[ReconcileRow]:
    journal = engine.journal
    # Interrupted launches and releases first: a cluster found up is recorded before the
    # invocations that run on it are looked at.
    rows = [
        ReconcileRow(f"cluster {s.name}", s.before, s.after, s.evidence, s.failed)
        for s in settle_leases(engine)
    ]
    active = journal.invocations.active()
    # One transaction for every lease: a round over a thousand invocations costs one fsync.
    taken = engine.hold_all([inv.id for inv in active])
    mine: list[Invocation] = []
    for inv in active:
        if inv.id in taken:
            mine.append(inv)
        else:
            rows.append(
                ReconcileRow(
                    inv.id, inv.state, inv.state, f"left alone: leased by live {inv.lease_owner}"
                )
            )
    try:
        observations = _observe_batched(engine, mine)
        for inv in mine:
            rows.append(_reconcile_one(engine, inv, observations.get(inv.id)))
    finally:
        engine.let_go_all([inv.id for inv in mine])
    rows.extend(_finish_campaigns(engine))
    return rows


def _finish_campaigns(engine: Engine) -> list[ReconcileRow]:
    """Clusters whose last evaluation asked for `--down` and whose driver died first."""
    try:
        released = release_finished_campaigns(engine)
    except Exception as exc:  # the lease stays up or releasing: the next round tries again
        reason = f"error: {error_facts(exc).reason}"
        return [ReconcileRow("clusters", LeaseState.UP, LeaseState.UP, reason, True)]
    return [
        ReconcileRow(f"cluster {lease.name}", LeaseState.UP, lease.state, "released (run --down)")
        for lease in released
    ]


def _observe_batched(engine: Engine, invocations: list[Invocation]) -> dict[str, Seen]:
    """One status call per adapter and site for every invocation that needs one."""
    groups: dict[tuple[str, str], list[tuple[Invocation, JobRef]]] = defaultdict(list)
    seen: dict[str, Seen] = {}
    for inv in invocations:
        if not needs_observation(inv):
            continue
        try:
            key = (inv.adapter, engine.adapters.request_of(inv).backend_key())
        except Exception as exc:  # a request that no longer parses: its own row says so
            seen[inv.id] = seen_error(_as_backend_error(exc))
            continue
        groups[key].append((inv, engine.adapters.job_ref(inv)))
    for pairs in groups.values():
        shared = engine.adapters.shared_polling(pairs[0][0])
        if shared is not None:
            # The site's shared round (engine/shared_poll.py): one query for these and for
            # every other process's watched jobs of the site.
            seen.update(engine.shared.observe_now([inv for inv, _ in pairs], shared))
            continue
        try:
            statuses = engine.adapters.backend(pairs[0][0]).status([ref for _, ref in pairs])
        except Exception as exc:
            seen.update({inv.id: seen_error(_as_backend_error(exc)) for inv, _ in pairs})
            continue
        seen.update({inv.id: seen_of(engine, inv, statuses[ref.job_name]) for inv, ref in pairs})
    return seen


def _as_backend_error(exc: Exception) -> BackendError:
    if isinstance(exc, BackendError):
        return exc
    facts = error_facts(exc)
    return BackendError(facts.reason, retryable=facts.retryable, fix=facts.fix)


def _reconcile_one(engine: Engine, inv: Invocation, seen: Seen | None) -> ReconcileRow:
    before = inv
    try:
        deadline = engine.deadline(inv.id)
        if (by := orphaned(inv) or overdue(inv, deadline, engine.clock())) is not None:
            inv = engine.request_cancel(inv, by)
        after = engine.advance(inv, seen)
    except Exception as exc:
        facts = error_facts(exc)
        fix = f"; fix: {facts.fix}" if facts.fix else ""
        current = engine.journal.invocations.get(inv.id)
        return ReconcileRow(
            inv.id, before.state, current.state, f"error: {facts.reason}{fix}", True
        )
    if after.version != before.version:
        last = engine.journal.invocations.history(inv.id)[-1]
        evidence = f"{last.event}: " + ", ".join(
            f"{key}={value}" for key, value in last.evidence.items() if value not in ("", None)
        )
    elif (since := _held_for_outage(engine, after, seen)) is not None:
        assert seen is not None
        timeout = after.settings.unreachable_timeout_seconds
        until = iso(since + timedelta(seconds=timeout))
        fix = f"; fix: {seen.fix}" if seen.fix else ""
        evidence = (
            f"left as it is: {seen.named} since {iso(since)}, within its unreachable timeout "
            f"({timeout:g} s, until {until}): {seen.evidence}{fix}"
        )
        return ReconcileRow(inv.id, before.state, after.state, evidence, waiting_until=until)
    elif inv.id in engine.waiting:
        evidence = f"left as it is: {engine.waiting[inv.id]}"
    elif inv.id in engine.notes:
        evidence = engine.notes[inv.id]
    elif seen is not None:
        fix = f"; fix: {seen.fix}" if seen.fix else ""
        evidence = f"{seen.named}: {seen.evidence}{fix}"
    else:
        evidence = "nothing to do yet"
    return ReconcileRow(inv.id, before.state, after.state, evidence)


def _held_for_outage(engine: Engine, inv: Invocation, seen: Seen | None) -> datetime | None:
    """The start of the outage a RUNNING invocation was just left alone for (the planner
    holds it while its recorded unreachable timeout lasts)."""
    if seen is None or seen.sight is not Sight.UNREACHABLE or inv.state is not JobState.RUNNING:
        return None
    return engine.journal.invocations.unreachable_since(inv.id, inv.attempt)
