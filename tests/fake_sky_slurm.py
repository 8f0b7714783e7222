"""The fake `sky`'s Slurm (fake_sky.py imports this from its own directory): the login node's
`sinfo` and the allocation's sbatch refusing a time beyond the partition. Stdlib only.

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

#: The local cluster's first two partitions (`sinfo -h -o '%P %l'`).
DEFAULT_SINFO = "main* 30:00\npriority 2:00:00\n"
_TIME = re.compile(r"(?:(\d+)-)?(\d+):(\d+):(\d+)")


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
