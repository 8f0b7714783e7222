"""Adapters whose jobs run inside a long-lived allocation they hold themselves (a SkyPilot
cluster: one Slurm allocation per campaign, reused by every evaluation, recreated when it ends).

The adapter decides and carries out; the engine journals. Before each submit the engine asks
`plan_lease()` (the adapter inspects, refreshing, and says reuse or launch), commits the intent
to launch in the journal's cluster lease table, calls `launch()`, and records what it left.
`release()` ends the allocation, again after a committed intent; `inspect_lease()` lets
`reconcile` settle a launch or release that a crash interrupted. Plain data, no journal.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol, runtime_checkable

from msgspec import Struct

__all__ = [
    "ClusterSight",
    "LeaseAction",
    "LeasePlan",
    "LeaseReceipt",
    "LeasingBackend",
    "ReleasedWhenDone",
]


class LeaseAction(StrEnum):
    REUSE = "reuse"  # up and compatible, its allocation alive (seen by a refresh)
    LAUNCH = "launch"  # no such cluster (never launched, released, or its allocation ended)
    RESUME = "resume"  # it exists but is not up (provisioning was interrupted): launch resumes it


class LeasePlan(Struct, frozen=True):
    action: LeaseAction
    #: the cluster's stable name (from the campaign id and the launch shape's fingerprint)
    cluster: str
    fingerprint: str
    #: the operator profile it is (or would be) launched with: provenance, not a constraint
    profile: str
    #: the campaign (run) id
    campaign: str
    #: Slurm job id(s) of the allocation holding it now (REUSE only)
    allocation: tuple[str, ...]
    reason: str


class LeaseReceipt(Struct, frozen=True):
    """What a launch left (or a reuse found)."""

    cluster: str
    fingerprint: str
    profile: str
    allocation: tuple[str, ...]
    launched: bool
    evidence: str


class ClusterSight(Struct, frozen=True):
    """The cluster as a refreshed inspection shows it."""

    #: the control plane knows the cluster (an ended allocation is dropped by the refresh)
    exists: bool
    up: bool
    allocation: tuple[str, ...]
    #: a launch request may still be under way in the control plane (its client died)
    launching: bool
    evidence: str


@runtime_checkable
class LeasingBackend(Protocol):
    """A Backend that runs its jobs inside an allocation it leases; one instance, one cluster."""

    def plan_lease(self) -> LeasePlan:
        """Inspect (refreshing) and decide. Raises SubmitRejected for a cluster of that name
        that cannot serve the request: it is neither reused nor torn down."""
        ...

    def launch(self, plan: LeasePlan) -> LeaseReceipt:
        """Carry out a LAUNCH or RESUME plan (idempotent: a cluster that came up meanwhile is
        reused); return its allocation."""
        ...

    def release(self) -> str:
        """End the allocation (idempotent: an unknown cluster is fine); return evidence."""
        ...

    def inspect_lease(self) -> ClusterSight:
        """The cluster as a refresh shows it, to settle an interrupted launch or release."""
        ...


@runtime_checkable
class ReleasedWhenDone(Protocol):
    """A request that may ask for its cluster to be released once its invocation is DONE and
    nothing else runs there (the campaign's last evaluation: `vibesys run --down`)."""

    down: bool
