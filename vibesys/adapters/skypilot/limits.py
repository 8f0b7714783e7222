"""A profile's allocation against the Slurm partitions' limits, known before `sky launch`: the
allocation's sbatch asks `allocation_time`, and a time no partition it may use allows is refused
by Slurm at launch (or, where partition limits are not enforced at submission, queued for ever).

Asked once per launch (one `sinfo` on the login node, beside a launch of a minute), never per
job; `vibesys check --profile` runs the same comparison. A failed or unreadable sinfo proves
nothing: the launch goes on, and Slurm's own refusal is read from its output (`ops.launch`).
"""

from __future__ import annotations

from vibesys.adapters.skypilot.errors import SkyProfileError
from vibesys.adapters.slurm.limits import (
    limits_argv,
    minutes_asked,
    parse_partition_limits,
    time_refusal,
)
from vibesys.adapters.slurm.parse import UnparseableOutput
from vibesys.adapters.transports import Runner
from vibesys.config.resources import EffectiveResources, allocation_seconds
from vibesys.errors import BackendError

__all__ = ["allocation_fix", "allocation_refusal", "infra_partition", "refuse_beyond_limits"]


def infra_partition(infra: str) -> str | None:
    """The partition an infra `slurm/<alias>/<partition>` names; None when it names none."""
    parts = infra.split("/")
    return parts[2] if len(parts) == 3 and parts[0] == "slurm" else None


def allocation_refusal(profile: str, infra: str, allocation_time: str, sinfo: str) -> str | None:
    """One line naming the limit when `allocation_time` fits no partition the allocation may
    use: the one infra names, else any (SkyPilot may pick another than the default); None when
    it fits, or infra is not Slurm. Raises UnparseableOutput for an sinfo it cannot read."""
    if not infra.startswith("slurm"):
        return None
    limits = parse_partition_limits(sinfo)
    partition = infra_partition(infra)
    minutes = minutes_asked(allocation_seconds(allocation_time))
    asked = f"allocation_time {allocation_time} of [profiles.{profile}]"
    return time_refusal(minutes, (partition,) if partition else limits.names, limits, asked)


def allocation_fix(profile: str, source: str = "clusters.toml") -> str:
    return (
        f"lower allocation_time of [profiles.{profile}] in {source} to what the partition "
        f"allows, or name one that allows it in infra (`vibesys check --profile {profile}` "
        "lists the limits)"
    )


def refuse_beyond_limits(effective: EffectiveResources, runner: Runner, timeout: float) -> None:
    """Before a launch: SkyProfileError (MISCONFIGURED, nothing launched) when the profile's
    allocation_time is proven to fit no partition it may use."""
    if not effective.infra.startswith("slurm"):
        return
    try:
        done = runner.run(limits_argv(), timeout=timeout)
        refused = (
            allocation_refusal(
                effective.profile, effective.infra, effective.allocation_time, done.stdout
            )
            if done.returncode == 0
            else None
        )
    except (BackendError, UnparseableOutput):
        return  # proves nothing: Slurm still decides, and its refusal is read at launch
    if refused is not None:
        raise SkyProfileError(
            f"{refused}: nothing launched",
            maybe_submitted=False,
            fix=allocation_fix(effective.profile),
        )
