"""`vibesys reconcile`: bring every unfinished invocation in line with what the adapters show.

Invocations with a live lease belong to the process holding it and are left alone. For each of
the others the job is looked up (one batched status call per adapter) and the invocation
reattached, collected, retried or marked UNRESOLVED. Nothing is written when nothing changed,
so running it twice changes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from vibesys.adapters.base import JobRef
from vibesys.engine.core import Engine, Observation, backend_key
from vibesys.engine.observe import describe
from vibesys.errors import BackendError
from vibesys.journal_schema import Invocation
from vibesys.states import JobState


@dataclass(frozen=True, slots=True)
class ReconcileRow:
    invocation_id: str
    before: JobState
    after: JobState
    evidence: str

    def to_json(self) -> dict[str, str]:
        return {
            "invocation": self.invocation_id,
            "before": self.before,
            "after": self.after,
            "evidence": self.evidence,
        }


def reconcile(engine: Engine) -> list[ReconcileRow]:
    journal = engine.journal
    rows: list[ReconcileRow] = []
    active = journal.active()
    # One transaction for every lease: a round over a thousand invocations costs one fsync.
    taken = journal.acquire_leases([inv.id for inv in active], engine.owner, engine.lease_ttl)
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
        journal.release_leases([inv.id for inv in mine], engine.owner)
    return rows


def _observe_batched(engine: Engine, invocations: list[Invocation]) -> dict[str, Observation]:
    """One status call per adapter for every invocation that needs one."""
    by_backend: dict[tuple[str, str], list[tuple[Invocation, JobRef]]] = defaultdict(list)
    for inv in invocations:
        if engine.needs_observation(inv):
            by_backend[backend_key(inv)].append((inv, engine.job_ref(inv)))
    seen: dict[str, Observation] = {}
    for pairs in by_backend.values():
        try:
            statuses = engine.backend(pairs[0][0]).status([ref for _, ref in pairs])
        except BackendError as exc:
            seen.update({inv.id: exc for inv, _ in pairs})
            continue
        seen.update({inv.id: statuses[ref.job_name] for inv, ref in pairs})
    return seen


def _reconcile_one(engine: Engine, inv: Invocation, observed: Observation | None) -> ReconcileRow:
    before = inv
    if inv.cancel_requested:
        engine.send_cancel(inv)
    if isinstance(observed, BackendError) and inv.state is JobState.RUNNING:
        # The scheduler did not answer: the outcome cannot be proven now.
        after = engine.mark_unknown(inv, f"status failed: {observed.evidence}")
    else:
        after = engine.advance(inv, observed)
    if after.version != before.version:
        last = engine.journal.history(inv.id)[-1]
        evidence = f"{last.event}: " + ", ".join(
            f"{key}={value}" for key, value in last.evidence.items() if value not in ("", None)
        )
    elif isinstance(observed, BackendError):
        evidence = f"unreachable: {observed.evidence}"
    elif observed is not None:
        evidence = describe(observed)
    else:
        evidence = "nothing to do yet"
    return ReconcileRow(inv.id, before.state, after.state, evidence)
