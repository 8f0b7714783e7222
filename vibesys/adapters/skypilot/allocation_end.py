"""How a lost allocation ended, asked of Slurm.

A SkyPilot cluster on Slurm is one Slurm job (the allocation). When it ends SkyPilot only drops
the cluster ("Cluster terminated on the cloud"): 0.14.1 maps no Slurm state to a preemption,
its refresh forgets a PREEMPTED job like a TIMEOUT one. Slurm's accounting keeps the job's
State for good (PREEMPTED, TIMEOUT, NODE_FAIL, CANCELLED, COMPLETED), so one `sacct` on the
login node, only in a status round that found an allocation lost, tells a preemption from a
wall time (`classify` names each). The query and its parser are the Slurm adapter's.

A failed ask is not an error: the loss is proven by SkyPilot either way, only its cause is then
unknown, and ALLOCATION_EXPIRED stays its name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from msgspec import structs

from vibesys.adapters.base import RemoteState, RemoteStatus
from vibesys.adapters.skypilot.classify import Observed, classify, lost_allocation
from vibesys.adapters.skypilot.run_dirs import RunDirs
from vibesys.adapters.slurm.parse import SACCT_PLACEHOLDER_NAME, parse_sacct, sacct_argv
from vibesys.errors import BackendError

__all__ = ["allocation_ends", "name_losses"]


def allocation_ends(dirs: RunDirs, allocations: Sequence[str]) -> dict[str, str]:
    """Slurm's State of each allocation it has a record of (`CANCELLED` for `CANCELLED by 0`);
    empty when it could not be asked (no accounting, sacct failed or printed nonsense)."""
    try:
        result = dirs.runner.run(sacct_argv(job_ids=allocations), timeout=dirs.timeout)
        rows = parse_sacct(result.stdout) if result.ok else []
    except BackendError:
        return {}
    # slurmdbd writes a job's final record seconds after its end; until then the row carries
    # a placeholder name and a stale state, which says nothing of how it ended.
    return {row.job_id: row.state for row in rows if row.job_name != SACCT_PLACEHOLDER_NAME}


def name_losses(
    results: Mapping[str, RemoteStatus], seen: Mapping[str, Observed], dirs: RunDirs
) -> dict[str, RemoteStatus]:
    """`results` with every lost allocation named by how Slurm says it ended: one sacct for
    all of them, none when nothing was lost."""
    lost = {
        name: lost_allocation(seen[name])
        for name, status in results.items()
        if status.state is RemoteState.ALLOCATION_EXPIRED
    }
    asked = sorted({allocation for allocation in lost.values() if allocation})
    if not asked:
        return dict(results)
    ends = allocation_ends(dirs, asked)
    return {
        name: classify(structs.replace(seen[name], allocation_end=ends.get(lost[name] or "")))
        if name in lost
        else status
        for name, status in results.items()
    }
