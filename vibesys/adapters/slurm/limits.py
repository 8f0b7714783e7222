"""The partitions' limits a request must fit, known before anything is submitted, and Slurm's own
refusals read as the request's fault. Pure: the callers run `sinfo` (once) and sbatch.

A request is refused here only when it is proven not to fit: every partition it may use is
listed by sinfo with a time limit, and none allows its time. Anything less certain (a partition
sinfo does not list, a limit it reports as n/a) is left to Slurm, whose refusal is then read by
`slurm_refusal`: nothing was submitted, and asking again cannot help.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from msgspec import Struct

from vibesys.adapters.slurm.parse import UnparseableOutput, lines_of
from vibesys.adapters.slurm.site_parse import parse_sinfo_partitions, parse_slurm_minutes

__all__ = [
    "LIMITS_FORMAT",
    "REFUSALS",
    "BatchTime",
    "PartitionLimits",
    "batch_time",
    "limits_argv",
    "minutes_asked",
    "parse_partition_limits",
    "sbatch_sizing",
    "slurm_refusal",
    "time_refusal",
]

#: sbatch's answers that prove the request itself is invalid (nothing runs, retrying is futile),
#: as Slurm 22.05 prints them after "Batch job submission failed: ".
REFUSALS: Final = re.compile(
    r"invalid partition|Requested time limit is invalid|node configuration is not available|"
    r"Memory specification can not be satisfied|Invalid generic resource|Invalid account|"
    r"Invalid qos|violates accounting/QOS policy|Invalid dependency|Job dependency problem|"
    r"Node count specification invalid|More processors requested than permitted",
    re.IGNORECASE,
)

#: `sinfo -h -o LIMITS_FORMAT`: partition (the default one marked `*`) and its time limit.
LIMITS_FORMAT: Final = "%P %l"


def limits_argv() -> list[str]:
    return ["sinfo", "-h", "-o", LIMITS_FORMAT]


def slurm_refusal(text: str) -> str | None:
    """The line of `text` in which Slurm refuses the request for good (see REFUSALS), with
    its spaces collapsed; None when no line does."""
    for line in lines_of(text):
        if REFUSALS.search(line):
            return " ".join(line.split())
    return None


class PartitionLimits(Struct, frozen=True):
    """What sinfo says of the partitions: each one's time limit in minutes (None: none; a
    partition reported `n/a` is absent), every name listed, and the default partition."""

    minutes: dict[str, int | None]
    names: tuple[str, ...]
    default: str | None

    def shown(self, name: str) -> str:
        if name not in self.minutes:
            return f"{name} (no time limit reported)"
        limit = self.minutes[name]
        return f"{name} {'unlimited' if limit is None else f'MaxTime {limit} min'}"


def parse_partition_limits(text: str) -> PartitionLimits:
    """`sinfo -h -o '%P %l'` read (UnparseableOutput when it is not that)."""
    words = [line.split()[0] for line in lines_of(text)]
    if any(not word.rstrip("*") for word in words):
        raise UnparseableOutput(f"sinfo printed {text[:200]!r}: a line names no partition")
    names = tuple(dict.fromkeys(word.rstrip("*") for word in words))
    default = next((word.rstrip("*") for word in words if word.endswith("*")), None)
    return PartitionLimits(parse_sinfo_partitions(text), names, default)


def minutes_asked(seconds: int) -> int:
    """A request's time in whole minutes as Slurm counts it: a started minute is a minute
    (`--time=0:10` is a limit of 1 minute), so 30:30 does not fit a 30-minute MaxTime."""
    return -(-seconds // 60)


def time_refusal(
    minutes: int, partitions: Sequence[str], limits: PartitionLimits, asked: str
) -> str | None:
    """One line naming the limit when `minutes` fits none of the partitions the request may
    use (`partitions`, or the default one when it names none); None when it fits one, or when
    that cannot be proven (a partition sinfo does not list, or lists without a limit)."""
    targets = tuple(partitions) or ((limits.default,) if limits.default else ())
    if not targets or any(name not in limits.minutes for name in targets):
        return None
    if any(_fits(limits.minutes[name], minutes) for name in targets):
        return None
    if len(targets) == 1:
        [name] = targets
        where = f"partition {name}'s MaxTime ({limits.minutes[name]} min)"
    else:
        where = "the MaxTime of every partition it may use (" + ", ".join(
            limits.shown(name) for name in targets
        )
        where += ")"
    return f"{asked} exceeds {where}"


def _fits(limit: int | None, minutes: int) -> bool:
    return limit is None or minutes <= limit


class BatchTime(Struct, frozen=True):
    """The time limit a batch job gets and where: `asked` names it as the operator wrote it;
    `by_site` when [slurm] sbatch_arguments set it (sbatch reads them after the request's)."""

    minutes: int
    partitions: tuple[str, ...]
    asked: str
    by_site: bool


def batch_time(
    minutes: int | None, partitions: Sequence[str], arguments: Sequence[str]
) -> BatchTime | None:
    """The time a batch job asks (the request's `minutes` and `partitions`, unless
    sbatch_arguments set their own); None when it asks none (the partition's default time is
    within its limit) or sbatch cannot read the site's (sbatch then refuses it itself)."""
    site_partitions, site_time = sbatch_sizing(arguments)
    where = site_partitions or tuple(partitions)
    if site_time is None:
        return None if minutes is None else BatchTime(minutes, where, f"--time {minutes}", False)
    try:
        site_minutes = parse_slurm_minutes(site_time, round_up=True)
    except ValueError:
        return None
    if site_minutes is None:
        return None  # `infinite`: the partition's MaxTime applies, Slurm decides
    asked = f"[slurm] sbatch_arguments --time={site_time}"
    return BatchTime(site_minutes, where, asked, True)


def sbatch_sizing(arguments: Sequence[str]) -> tuple[tuple[str, ...], str | None]:
    """The partitions and time limit that [slurm] sbatch_arguments give every batch job (the
    last of each, as sbatch reads them)."""
    partitions: tuple[str, ...] = ()
    time_limit: str | None = None
    for argument in arguments:
        for prefix in ("--partition=", "-p"):
            if argument.startswith(prefix) and len(argument) > len(prefix):
                partitions = tuple(p for p in argument[len(prefix) :].split(",") if p)
        for prefix in ("--time=", "-t"):
            if argument.startswith(prefix) and len(argument) > len(prefix):
                time_limit = argument[len(prefix) :]
    return partitions, time_limit
