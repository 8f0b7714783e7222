"""Where and on what one SkyPilot attempt ran: recorded with the attempt, shown by
`journal show` (the engine stores `as_dict()` under the attempt)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Provenance"]


@dataclass(frozen=True, slots=True)
class Provenance:
    profile: str
    cluster: str
    infra: str
    accelerator_type: str | None
    accelerators_per_node: int
    nodes: int
    #: the container entry point (or other wrapper) every command ran under
    command_prefix: tuple[str, ...]
    sky_job_id: str | None
    #: Slurm job id of the allocation that held the cluster when the attempt ran
    allocation_job_id: str | None
    host: str | None = None
    started_at: str | None = None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["command_prefix"] = list(self.command_prefix)
        return data
