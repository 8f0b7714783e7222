"""The fake `sky`'s Slurm on the "login node" (fake_sky.py imports this from its own directory):
the allocations under its clusters as Slurm jobs, for `squeue` and `sacct`. Stdlib only.

An allocation's end is recorded in the state's "ended" (allocation id → sacct State, e.g.
"PREEMPTED", "TIMEOUT", "CANCELLED by 0"); the formats copy tests/data/sacct/."""

from __future__ import annotations

import sys
from typing import Any

USER_HASH = "0123abcd"


def squeue(state: dict[str, Any], argv: list[str]) -> int:
    """`squeue -h --name NAME -o %i --states=...`: the live allocation of that cluster."""
    wanted = argv[argv.index("--name") + 1]
    for name, cluster in state["clusters"].items():
        if f"{name}-{USER_HASH}" == wanted and not cluster.get("lost"):
            sys.stdout.write(f"{cluster['allocation']}\n")
    return 0


def sacct(state: dict[str, Any], argv: list[str]) -> int:
    """`sacct -X -n -P -o <the Slurm adapter's SACCT_FORMAT> -j IDS`: one row per allocation
    Slurm has a record of, live or ended (ids it never saw print nothing, rc 0)."""
    wanted = argv[argv.index("-j") + 1].split(",")
    states = {str(c["allocation"]): "RUNNING" for c in state["clusters"].values()}
    states.update(state.get("ended", {}))
    names = {str(c["allocation"]): f"{n}-{USER_HASH}" for n, c in state["clusters"].items()}
    for job_id in (j for j in wanted if states.get(j)):
        live = states[job_id] == "RUNNING"
        end, code = ("Unknown", "0:0") if live else ("2026-12-01T10:05:00", "0:15")
        name = names.get(job_id, "vibesys-gone")
        row = [job_id, name, states[job_id], code, "2026-12-01T10:00:00", end, "None"]
        sys.stdout.write("|".join([*row, "main", "node1", "billing=1,cpu=1,node=1"]) + "\n")
    return 0
