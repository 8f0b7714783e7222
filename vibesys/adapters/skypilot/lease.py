"""The campaign's cluster as an allocation lease: the pure decision whether an existing cluster
can be reused (the engine journals the launch and release it leads to)."""

from __future__ import annotations

from vibesys.adapters.leases import LeaseAction, LeasePlan
from vibesys.adapters.skypilot.parse import ClusterRecord, ClusterStatus
from vibesys.config.resources import EffectiveResources

__all__ = ["mismatches", "plan_lease"]


def _infra_parts(infra: str) -> tuple[str, str | None]:
    parts = infra.split("/")
    return parts[0], parts[1] if len(parts) > 1 else None


def mismatches(record: ClusterRecord, effective: EffectiveResources) -> list[str]:
    """How an existing cluster differs from what the request needs (empty: compatible). Only
    what `sky status` reports can be compared; the name's fingerprint covers the rest."""
    found: list[str] = []
    cloud, region = _infra_parts(effective.infra)
    if record.cloud is not None and record.cloud.lower() != cloud:
        found.append(f"cloud {record.cloud} (wanted {cloud})")
    if region is not None and record.region is not None and record.region != region:
        found.append(f"region {record.region} (wanted {region})")
    if record.nodes != effective.nodes:
        found.append(f"{record.nodes} nodes (wanted {effective.nodes})")
    wanted_cpus = effective.cpus_per_node
    if wanted_cpus is not None and record.cpus is not None and _number(record.cpus) != wanted_cpus:
        found.append(f"{record.cpus} CPUs per node (wanted {wanted_cpus})")
    wanted_accelerators = (
        f"{effective.accelerator_type}:{effective.accelerators_per_node}"
        if effective.accelerators_per_node > 0
        else None
    )
    if (record.accelerators or None) != wanted_accelerators:
        found.append(f"accelerators {record.accelerators} (wanted {wanted_accelerators})")
    return found


def plan_lease(
    record: ClusterRecord | None,
    effective: EffectiveResources,
    *,
    cluster: str,
    fingerprint: str,
    campaign: str,
) -> LeasePlan:
    """What to do with the campaign's cluster, given its record after a refresh. Raises
    nothing: an incompatible cluster is for the caller to refuse (ClusterIncompatible)."""

    def plan(action: LeaseAction, reason: str) -> LeasePlan:
        allocation = record.allocation if record is not None else ()
        return LeasePlan(
            action, cluster, fingerprint, effective.profile, campaign, allocation, reason
        )

    if record is None:
        return plan(LeaseAction.LAUNCH, f"no cluster {cluster} (never launched, or gone)")
    if record.status is ClusterStatus.UP:
        return plan(LeaseAction.REUSE, f"cluster {cluster} is up")
    return plan(LeaseAction.RESUME, f"cluster {cluster} is {record.status}; launching resumes it")


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None
