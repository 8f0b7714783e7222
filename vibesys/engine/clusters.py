"""Cluster leases in the engine: the allocations an adapter holds itself (a campaign's SkyPilot
cluster, `vibesys.adapters.leases.LeasingBackend`), launched and released like any other
effect: the intent is committed to the journal's cluster lease table first, a failpoint sits
after each intent and each effect, and what the effect left is recorded after it. The states
a lease moves through are the lease's own transition table (`vibesys/states/lease_table.py`).

- `lease_step`: before a submit (the engine's step for the Submit effect), reuse the
  campaign's cluster or launch it (`execute.launch_cluster`), and record that the attempt runs
  on it; refused while another evaluation of the same campaign is not DONE (one remote
  evaluation at a time per campaign).
- `release_cluster`: `vibesys clusters release` (refused while an invocation still uses it).
- `release_when_done`, `release_finished_campaigns`: `vibesys run --down` (the campaign's last
  evaluation) releases the cluster once it is DONE and nothing else runs there; its driver
  does it, and `reconcile` does what a crash left undone.
- `settle_leases`: `reconcile` settles a launch or release a crash interrupted, from what the
  control plane shows, so that no cluster is left that nobody records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from msgspec import Struct

from vibesys.adapters.base import Backend
from vibesys.adapters.leases import (
    LeaseAction,
    LeasePlan,
    LeaseReceipt,
    LeasingBackend,
    ReleasedWhenDone,
)
from vibesys.engine.adapter_access import Adapters
from vibesys.engine.execute import JOURNAL_FAILURES, error_facts, launch_cluster
from vibesys.engine.failpoints import failpoint
from vibesys.engine.seen import Fact, SubmitFailed
from vibesys.errors import BackendError, BackendUnavailable, StaleState, SubmitRejected, UsageError
from vibesys.journal_schema import ClusterLease, Invocation, LeaseState
from vibesys.states import JobState
from vibesys.states.lease_table import LeaseChoice, LeaseDecision, decide_lease

if TYPE_CHECKING:
    from vibesys.engine.core import Engine
    from vibesys.journal_schema import Journal

__all__ = [
    "SettledLease",
    "hold_lease",
    "release_cluster",
    "release_finished_campaigns",
    "release_when_done",
    "settle_leases",
]


class SettledLease(Struct, frozen=True):
    lease_id: int
    name: str
    before: LeaseState
    after: LeaseState
    evidence: str
    failed: bool = False


def lease_step(engine: Engine, inv: Invocation) -> Fact | None:
    """The cluster lease's step before a submit, inside the submit's error boundary: None to
    go on and submit, or the failure the submit ends with (nothing was submitted)."""
    try:
        hold_lease(engine.journal, engine.owner, inv, engine.adapters.backend(inv))
    except JOURNAL_FAILURES:
        raise
    except Exception as exc:  # the boundary: every failure becomes what it proves
        return SubmitFailed(error_facts(exc))
    return None


def hold_lease(journal: Journal, owner: str, inv: Invocation, backend: Backend) -> None:
    """Make sure the campaign's cluster is up before the attempt is submitted to it, and
    record that the attempt runs on it. Observed: the adapter's plan (a refreshed status) and
    the campaign's lease rows; decided by the lease table (`decide_lease`: refuse, reuse,
    launch); recorded: reuse, or the launch's intent before the launch effect and what it
    left after. A backend that holds no allocation of its own needs nothing."""
    leasing = backend.leasing()
    if leasing is None:
        return
    plan = leasing.plan_lease()
    decision = _refuse_while_busy(journal, inv, plan)
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
        lease = journal.clusters.record_reuse(
            **facts, allocation=plan.allocation, evidence=plan.reason
        )
        if lease.state is LeaseState.RELEASING:
            raise BackendUnavailable(
                f"cluster {plan.cluster} is being released (lease {lease.id}); the next "
                "attempt launches a new one",
                maybe_submitted=False,
            )
    else:
        try:
            lease = journal.clusters.intend_launch(**facts, reason=plan.reason, owner=owner)
        except StaleState as exc:  # a live process is launching or releasing it now
            raise BackendUnavailable(str(exc), maybe_submitted=False) from None
        failpoint("after_launch_intent")
        lease = _launched(journal, plan, lease, launch_cluster(leasing, plan))
    try:
        journal.clusters.record_lease_use(lease.id, inv.id, inv.attempt)
    except StaleState as exc:  # a release was intended meanwhile: nothing was submitted
        raise BackendUnavailable(str(exc), maybe_submitted=False) from None
    # Two processes may both have passed the first check: the one that sees the other now
    # steps back (at worst both do; never two evaluations at once).
    _refuse_while_busy(journal, inv, plan)


def _refuse_while_busy(journal: Journal, inv: Invocation, plan: LeasePlan) -> LeaseDecision:
    """The lease table's choice for this attempt's cluster (`decide_lease`) from the lease
    rows as they are now; a refusal raised as REJECTED: nothing was submitted."""
    users = journal.clusters.unfinished_users(campaign=(inv.adapter, plan.campaign))
    decision = decide_lease(inv.id, plan.campaign, users, plan.action is LeaseAction.REUSE)
    if decision.choice is LeaseChoice.REFUSE:
        raise SubmitRejected(decision.why)
    return decision


def _launched(
    journal: Journal, plan: LeasePlan, lease: ClusterLease, outcome: LeaseReceipt | BackendError
) -> ClusterLease:
    """Record what the launch left: up, failed (refused: nothing launched), or still
    `launching` (an allocation may exist: the next launch continues it, or reconcile settles
    it); a failure fails the submit, which was never made."""
    if isinstance(outcome, SubmitRejected):
        journal.clusters.record_launch_failed(
            lease.id, f"refused, nothing launched: {outcome.evidence}"
        )
        raise outcome
    if isinstance(outcome, BackendError):
        journal.clusters.note_lease(lease.id, f"launch failed: {outcome.evidence}")
        raise BackendError(
            f"launching cluster {plan.cluster} failed: {outcome}",
            evidence=outcome.evidence,
            maybe_submitted=False,
            retryable=outcome.retryable,
            fix=outcome.fix,
        ) from outcome
    return journal.clusters.record_launched(lease.id, outcome.allocation, outcome.evidence)


def release_cluster(engine: Engine, lease_id: int, reason: str) -> ClusterLease:
    """End a live lease's allocation: intent, `release()`, record. Refused (nothing written)
    while an invocation that ran on it is not DONE: its job would die with the allocation."""
    journal = engine.journal
    lease = journal.clusters.cluster_lease(lease_id)
    if not lease.live:
        raise UsageError(f"cluster {lease.name} (lease {lease.id}) is {lease.state}: not live")
    backend = _backend_of(engine, lease)
    # Refused there, under the write lock, while an invocation that ran on it is not DONE.
    lease = journal.clusters.intend_release(lease.id, engine.owner, reason)
    failpoint("after_release_intent")
    return _release(engine, backend, lease, "released")


def release_when_done(engine: Engine, inv: Invocation) -> list[ClusterLease]:
    """`run --down`: release the clusters a DONE invocation ran on, unless another evaluation
    still runs there (then the last one's own `--down`, or `vibesys clusters release`, ends
    it). A failed release stays `releasing` for reconcile; returns the released leases."""
    if inv.state is not JobState.DONE or not _asks_down(engine.adapters, inv):
        return []
    released = []
    used = {lease.id: lease for _, lease in engine.journal.clusters.leases_used_by(inv.id)}
    for lease in used.values():  # one lease may serve several attempts
        if lease.state is LeaseState.UP and not engine.journal.clusters.unfinished_users(
            lease_id=lease.id
        ):
            why = f"run --down: invocation {inv.id} is done"
            released.append(release_cluster(engine, lease.id, why))
    return released


def release_finished_campaigns(engine: Engine) -> list[ClusterLease]:
    """For reconcile: every cluster still up whose evaluations are all DONE, one of which
    asked for `--down` (its driver died before releasing it)."""
    released = []
    for lease in engine.journal.clusters.cluster_leases([LeaseState.UP]):
        users = {i for i, _ in engine.journal.clusters.lease_users(lease.id)}
        invocations = [engine.journal.invocations.get(i) for i in sorted(users)]
        if not any(_asks_down(engine.adapters, i) for i in invocations):
            continue
        if engine.journal.clusters.unfinished_users(lease_id=lease.id):
            continue
        why = "run --down, finished by reconcile: every evaluation on it is done"
        try:
            released.append(release_cluster(engine, lease.id, why))
        except Exception as exc:  # this lease stays for the next round; the others go on
            engine.journal.clusters.note_lease(lease.id, f"run --down release failed: {exc}")
    return released


def _asks_down(adapters: Adapters, inv: Invocation) -> bool:
    try:
        request = adapters.request_of(inv)
    except Exception:  # a request that no longer decodes asks for nothing
        return False
    return isinstance(request, ReleasedWhenDone) and request.down


def _release(
    engine: Engine, backend: LeasingBackend, lease: ClusterLease, why: str
) -> ClusterLease:
    evidence = backend.release()  # an error leaves the lease `releasing`, for reconcile
    failpoint("after_release_effect")
    return engine.journal.clusters.record_released(lease.id, f"{why}: {evidence}")


def settle_leases(engine: Engine) -> list[SettledLease]:
    """Settle every launch and release whose process is gone, from a refreshed inspection.
    A failure with one lease is reported on its row and never stops the others."""
    rows = []
    for lease in engine.journal.clusters.unsettled_leases(engine.owner, engine.clock()):
        try:
            after = _settle(engine, lease)
        except Exception as exc:  # one row says what failed; the others go on
            reason = exc.evidence if isinstance(exc, BackendError) else f"{exc}"
            rows.append(SettledLease(lease.id, lease.name, lease.state, lease.state, reason, True))
            continue
        text = after.evidence[-1]["text"] if after.evidence else ""
        rows.append(SettledLease(lease.id, lease.name, lease.state, after.state, text))
    return rows


def _settle(engine: Engine, lease: ClusterLease) -> ClusterLease:
    journal = engine.journal
    backend = _backend_of(engine, lease)
    sight = backend.inspect_lease()
    if lease.state is LeaseState.RELEASING:
        if sight.exists:
            return _release(engine, backend, lease, "the interrupted release, done again")
        return journal.clusters.record_released(
            lease.id, f"the release had ended it: {sight.evidence}"
        )
    if sight.up:
        return journal.clusters.record_launched(
            lease.id, sight.allocation, f"the interrupted launch left it up: {sight.evidence}"
        )
    if sight.exists or sight.launching:
        # Provisioning is under way (or stopped half-way): the row stays `launching`, recorded;
        # the next launch resumes it, a release ends it.
        why = "a launch request is still active" if sight.launching else sight.evidence
        return journal.clusters.note_lease(lease.id, f"not up yet: {why}")
    return journal.clusters.record_launch_failed(
        lease.id, f"the interrupted launch left no cluster: {sight.evidence}"
    )


def _backend_of(engine: Engine, lease: ClusterLease) -> LeasingBackend:
    request = engine.adapters.parse_request(lease.adapter, lease.request, lease.site_digest)
    backend = engine.adapters.backend_for(lease.adapter, request)
    leasing = backend.leasing()
    if leasing is None:
        raise UsageError(f"the {lease.adapter} adapter holds no cluster leases")
    return leasing
