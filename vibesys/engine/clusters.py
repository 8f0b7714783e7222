"""Cluster leases in the engine: the allocations an adapter holds itself (a campaign's SkyPilot
cluster, `vibesys.adapters.leases.LeasingBackend`), launched and released like any other
effect. Each step is observe, decide, commit, carry out, record: the lease table decides
(`vibesys/states/lease_table.py`: `decide_lease` refuses, reuses or launches; `settle_lease`
reads an interrupted one), `records.py` commits the intent before the effect and records what
the effect left after it, `execute.py` carries out the launch and the release, and a failpoint
sits after each intent and each effect.

- `lease_step`: before a submit (the engine's step for the Submit effect), reuse the
  campaign's cluster or launch it, and record that the attempt runs on it; refused while
  another evaluation of the same campaign is not DONE (one remote evaluation at a time per
  campaign).
- `release_cluster`: `vibesys clusters release` (refused while an invocation still uses it).
- `release_when_done`, `release_finished_campaigns`: `vibesys run --down` (the campaign's last
  evaluation) releases the cluster once it is DONE and nothing else runs there; its driver
  does it, and `reconcile` does what a crash left undone.
- `settle_leases`: `reconcile` settles a launch or release a crash interrupted, from what the
  control plane shows, so that no cluster is left that nobody records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec import Struct

from vibesys.adapters.leases import (
    LeaseAction,
    LeasePlan,
    LeaseReceipt,
    LeasingBackend,
    ReleasedWhenDone,
)
from vibesys.engine.adapter_access import Adapters
from vibesys.engine.execute import (
    JOURNAL_FAILURES,
    error_facts,
    launch_cluster,
    release_cluster_effect,
)
from vibesys.engine.failpoints import failpoint
from vibesys.engine.records import (
    commit_lease_choice,
    commit_release_intent,
    record_lease_outcome,
    record_lease_use,
)
from vibesys.engine.seen import Fact, SubmitFailed
from vibesys.errors import BackendError, BackendUnavailable, StaleState, SubmitRejected, UsageError
from vibesys.journal_schema import ClusterLease, Invocation, LeaseState
from vibesys.states import JobState
from vibesys.states.lease_table import (
    LeaseChoice,
    LeaseOutcome,
    decide_lease,
    settle_lease,
)

if TYPE_CHECKING:
    from vibesys.engine.core import Engine

__all__ = [
    "SettledLease",
    "hold_lease",
    "lease_step",
    "release_cluster",
    "release_finished_campaigns",
    "release_if_asked",
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
        hold_lease(engine, inv)
    except JOURNAL_FAILURES:
        raise
    except Exception as exc:  # the boundary: every failure becomes what it proves
        return SubmitFailed(error_facts(exc))
    return None


def hold_lease(engine: Engine, inv: Invocation) -> None:
    """Make sure the campaign's cluster is up before the attempt is submitted to it, and
    record that the attempt runs on it. Observed: the adapter's plan (a refreshed status) and
    the campaign's lease rows; decided: the lease table's choice (refuse, reuse, launch);
    committed: the reuse, or the launch's intent before the launch effect and what it left
    after. A backend that holds no allocation of its own needs nothing."""
    journal = engine.journal
    leasing = engine.adapters.backend(inv).leasing()
    if leasing is None:
        return
    plan = leasing.plan_lease()
    campaign, reuse = (inv.adapter, plan.campaign), plan.action is LeaseAction.REUSE
    # The lease table's choice from the lease rows as they are now; a refusal is REJECTED:
    # nothing was submitted.
    users = journal.clusters.unfinished_users(campaign=campaign)
    decision = decide_lease(inv.id, plan.campaign, users, reuse)
    if decision.choice is LeaseChoice.REFUSE:
        raise SubmitRejected(decision.why)
    if decision.choice is LeaseChoice.REUSE:
        lease = commit_lease_choice(journal, engine.owner, inv, plan, decision)
        if lease.state is LeaseState.RELEASING:
            raise BackendUnavailable(
                f"cluster {plan.cluster} is being released (lease {lease.id}); the next "
                "attempt launches a new one",
                maybe_submitted=False,
            )
    else:
        try:
            lease = commit_lease_choice(journal, engine.owner, inv, plan, decision)
        except StaleState as exc:  # a live process is launching or releasing it now
            raise BackendUnavailable(str(exc), maybe_submitted=False) from None
        failpoint("after_launch_intent")
        lease = _launched(engine, plan, lease, launch_cluster(leasing, plan))
    try:
        record_lease_use(journal, lease, inv)
    except StaleState as exc:  # a release was intended meanwhile: nothing was submitted
        raise BackendUnavailable(str(exc), maybe_submitted=False) from None
    # Two processes may both have passed the first check: the one that sees the other now
    # steps back (at worst both do; never two evaluations at once).
    users = journal.clusters.unfinished_users(campaign=campaign)
    again = decide_lease(inv.id, plan.campaign, users, reuse)
    if again.choice is LeaseChoice.REFUSE:
        raise SubmitRejected(again.why)


def _launched(
    engine: Engine, plan: LeasePlan, lease: ClusterLease, outcome: LeaseReceipt | BackendError
) -> ClusterLease:
    """Record what the launch left: up, failed (refused: nothing launched), or still
    `launching` (an allocation may exist: the next launch continues it, or reconcile settles
    it); a failure fails the submit, which was never made."""
    journal = engine.journal
    if isinstance(outcome, SubmitRejected):
        why = f"refused, nothing launched: {outcome.evidence}"
        record_lease_outcome(journal, lease.id, LeaseOutcome.LAUNCH_FAILED, why)
        raise outcome
    if isinstance(outcome, BackendError):
        why = f"launch failed: {outcome.evidence}"
        record_lease_outcome(journal, lease.id, LeaseOutcome.NOTED, why)
        raise BackendError(
            f"launching cluster {plan.cluster} failed: {outcome}",
            evidence=outcome.evidence,
            maybe_submitted=False,
            retryable=outcome.retryable,
            fix=outcome.fix,
        ) from outcome
    up = LeaseOutcome.UP
    return record_lease_outcome(journal, lease.id, up, outcome.evidence, outcome.allocation)


def release_cluster(engine: Engine, lease_id: int, reason: str) -> ClusterLease:
    """End a live lease's allocation: intent, `release()`, record. Refused (nothing written)
    while an invocation that ran on it is not DONE: its job would die with the allocation."""
    journal = engine.journal
    lease = journal.clusters.cluster_lease(lease_id)
    if not lease.live:
        raise UsageError(f"cluster {lease.name} (lease {lease.id}) is {lease.state}: not live")
    backend = _backend_of(engine, lease)
    # Refused there, under the write lock, while an invocation that ran on it is not DONE.
    lease = commit_release_intent(journal, lease.id, engine.owner, reason)
    failpoint("after_release_intent")
    return _release(engine, backend, lease, "released")


def release_if_asked(engine: Engine, inv: Invocation) -> None:
    """`run --down`: the campaign's cluster goes with its last evaluation. A failure leaves
    the release to reconcile; the invocation's own outcome stands."""
    try:
        for lease in release_when_done(engine, inv):
            engine.note(inv, f"released cluster {lease.name} (run --down)")
    except Exception as exc:
        reason = error_facts(exc).reason
        engine.note(inv, f"run --down: the cluster was not released ({reason}); reconcile will")


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
            why = f"run --down release failed: {exc}"
            record_lease_outcome(engine.journal, lease.id, LeaseOutcome.NOTED, why)
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
    evidence = release_cluster_effect(backend)  # an error leaves it `releasing`, for reconcile
    why = f"{why}: {evidence}"
    return record_lease_outcome(engine.journal, lease.id, LeaseOutcome.RELEASED, why)


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
    backend = _backend_of(engine, lease)
    sight = backend.inspect_lease()
    outcome = settle_lease(lease.state, exists=sight.exists, up=sight.up, launching=sight.launching)
    match outcome:
        case LeaseOutcome.RELEASE_AGAIN:
            return _release(engine, backend, lease, "the interrupted release, done again")
        case LeaseOutcome.RELEASED:
            why = f"the release had ended it: {sight.evidence}"
        case LeaseOutcome.UP:
            why = f"the interrupted launch left it up: {sight.evidence}"
        case LeaseOutcome.NOTED:
            # Provisioning is under way (or stopped half-way): the row stays `launching`,
            # noted; the next launch resumes it, a release ends it.
            seen = "a launch request is still active" if sight.launching else sight.evidence
            why = f"not up yet: {seen}"
        case LeaseOutcome.LAUNCH_FAILED:
            why = f"the interrupted launch left no cluster: {sight.evidence}"
    return record_lease_outcome(engine.journal, lease.id, outcome, why, sight.allocation)


def _backend_of(engine: Engine, lease: ClusterLease) -> LeasingBackend:
    request = engine.adapters.parse_request(lease.adapter, lease.request, lease.site_digest)
    backend = engine.adapters.backend_for(lease.adapter, request)
    leasing = backend.leasing()
    if leasing is None:
        raise UsageError(f"the {lease.adapter} adapter holds no cluster leases")
    return leasing
