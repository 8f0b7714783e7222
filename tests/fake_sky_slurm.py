"""The fake `sky`'s Slurm on the "login node" (fake_sky.py imports this from its own directory):
the allocations under its clusters as Slurm jobs, for `squeue` and `sacct`; the login node's
`sinfo`; and the allocation's sbatch refusing a time beyond the partition. Stdlib only.

An allocation's end is recorded in the state's "ended" (allocation id → sacct State, e.g.
"PREEMPTED", "TIMEOUT", "CANCELLED by 0"); the formats copy tests/data/sacct/.

`fake-sinfo TEXT` sets what `sinfo -h -o '%P %l'` prints (empty: sinfo fails, as with the
controller down); `fake-maxtime MINUTES` makes the launch's sbatch refuse a longer time as Slurm
22.05 does with EnforcePartLimits (the local cluster's exact words). How `sky launch` relays it
is modelled on SkyPilot 0.14.1's source (adaptors/slurm.py `submit_job`: a CommandError holding
sbatch's stderr, then ResourcesUnavailableError), not captured from a live run.
"""

from __future__ import annotations

import re
import sys
from typing import Any

USER_HASH = "0123abcd"
#: The local cluster's first two partitions (`sinfo -h -o '%P %l'`).
DEFAULT_SINFO = "main* 30:00\npriority 2:00:00\n"
_TIME = re.compile(r"(?:(\d+)-)?(\d+):(\d+):(\d+)")


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


def sinfo(state: dict[str, Any]) -> int:
    text = state.get("sinfo", DEFAULT_SINFO)
    if not text:
        sys.stderr.write("slurm_load_partitions: Unable to contact slurm controller\n")
        return 1
    sys.stdout.write(text)
    return 0


def launch_refused(state: dict[str, Any], task: dict[str, Any]) -> bool:
    """Print what a launch whose sbatch Slurm refuses prints; True when it is refused."""
    limit = state.get("maxtime")
    asked = task.get("config", {}).get("slurm", {}).get("sbatch_options", {}).get("time", "")
    found = _TIME.fullmatch(str(asked))
    if limit is None or found is None:
        return False
    days, hours, minutes, seconds = (int(part or 0) for part in found.groups())
    if ((days * 24 + hours) * 60 + minutes) * 60 + seconds <= int(limit) * 60:
        return False
    sys.stdout.write(
        "\x1b[0m⚙︎ Launching on Slurm localslurm\x1b[0m (main).\n"
        "sky.exceptions.CommandError: Command sbatch --partition=main "
        "/root/.sky_provision/vibesys-c.sh failed with return code 1.\n"
        "Failed to submit Slurm job.\n\n"
        "sbatch: error: Batch job submission failed: Requested time limit is invalid "
        "(missing or exceeds some limit)\n"
    )
    sys.stderr.write(
        "sky.exceptions.ResourcesUnavailableError: \x1b[31mFailed to provision all possible "
        "launchable resources.\x1b[0m Relax the task's resource requirements: 1x Slurm(cpus=1)\n"
    )
    return True
