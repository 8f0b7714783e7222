"""Where and on what one SkyPilot attempt ran: carried by every status (`RemoteStatus.
provenance`), recorded by the engine with the attempt, shown by `journal show`. Pure."""

from __future__ import annotations

import shlex
from datetime import UTC, datetime

from vibesys.adapters.rundir.claim import Claim
from vibesys.adapters.skypilot.classify import parse_job_ref_id
from vibesys.config.resources import EffectiveResources

__all__ = ["provenance"]


def provenance(
    effective: EffectiveResources,
    cluster: str,
    job_id: str | None,
    claim: Claim | None,
    ended_at: float | None = None,
) -> dict[str, str]:
    """The attempt's account of itself (its claim) where there is one, else what was recorded
    at submission; empty while nothing shows that the attempt exists."""
    own = claim if claim is not None and claim.kind == "job" else None
    sky_id, allocation = parse_job_ref_id(job_id)
    if own is None and sky_id is None:
        return {}
    found = {
        "profile": effective.profile,
        "cluster": cluster,
        "infra": effective.infra,
        "nodes": str(effective.nodes),
        "accelerator_type": effective.accelerator_type or "",
        "accelerators_per_node": str(effective.accelerators_per_node),
        "command_prefix": shlex.join(effective.command_prefix),
        "sky_job_id": (own.get("sky_job_id") if own else "") or _text(sky_id),
        "allocation_job_id": (own.get("slurm_job_id") if own else "") or (allocation or ""),
        "host": own.get("host") if own else "",
        "started_at": own.get("started_at") if own else "",
        # SkyPilot's own end time of the job (its queue's end_at), once it has one
        "ended_at": _moment(ended_at),
    }
    return {key: value for key, value in found.items() if value}


def _moment(epoch: float | None) -> str:
    if epoch is None:
        return ""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _text(value: int | None) -> str:
    return "" if value is None else str(value)
