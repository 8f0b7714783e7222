"""Where a Slurm job runs or ran (provenance), from the rows squeue and sacct print (`parse`).
Pure: the scheduler adds the site's name and puts it in every status."""

from __future__ import annotations

from typing import Final

from vibesys.adapters.base import TERMINAL_REMOTE, RemoteState
from vibesys.adapters.slurm.parse import SLURM_STATES, SacctRow, SqueueRow, never_satisfied

__all__ = ["provenance"]

#: What squeue and sacct print for "nothing (yet)" in these fields.
_NOTHING: Final = frozenset({"", "N/A", "None", "None assigned", "(null)", "Unknown"})


def provenance(row: SacctRow | SqueueRow) -> dict[str, str]:
    """Where the job runs or ran, as the scheduler reports it: its partition and node list,
    its CPUs and GRES (squeue) or allocated TRES (sacct), when it started and ended. Nothing a
    pending job only forecasts (its start, its nodes), nor a running job's end (its limit)."""
    state = SLURM_STATES.get(row.state, RemoteState.UNKNOWN)
    unsatisfied = state is RemoteState.CANCELLED and never_satisfied(row)
    # A job killed over its dependency never started (sacct's Start is when it was killed).
    started = state is RemoteState.RUNNING or (state in TERMINAL_REMOTE and not unsatisfied)
    ended = state in TERMINAL_REMOTE
    found: dict[str, str | None] = {"slurm_job_id": row.job_id, "partition": row.partition}
    if isinstance(row, SqueueRow):
        found |= {
            "nodes": row.nodes if started else None,
            "cpus": row.cpus if started else None,
            "gres": row.gres,
            "start": row.start if started else None,
            "end": row.end if ended else None,
        }
    else:
        found |= {
            "nodes": row.nodes if started else None,
            "tres": row.alloc_tres if started else None,
            "start": row.start.isoformat() if started and row.start else None,
            "end": row.end.isoformat() if ended and row.end else None,
        }
    return {key: value for key, value in found.items() if value and value not in _NOTHING}
