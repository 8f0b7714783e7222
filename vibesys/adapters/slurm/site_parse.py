"""Pure parsing of what a Slurm cluster says about itself: the partitions' time limits (`sinfo`)
and slurmctld's RPC rate limit (`scontrol show config`). The job queries are `parse.py`'s."""

from __future__ import annotations

import re
from typing import Final

from msgspec import Struct

from vibesys.adapters.slurm.parse import UnparseableOutput, lines_of

#: `sinfo -h -o SINFO_FORMAT`: partition name (without the default's `*`) and time limit.
SINFO_FORMAT: Final = "%R %l"


_SLURM_TIME = re.compile(
    r"^(?:(?P<days>\d+)-(?P<dh>\d+)(?::(?P<dm>\d+)(?::(?P<ds>\d+))?)?"
    r"|(?P<h>\d+):(?P<m>\d+):(?P<s>\d+)|(?P<mm>\d+)(?::(?P<ss>\d+))?)$"
)


def sinfo_argv() -> list[str]:
    return ["sinfo", "-h", "-o", SINFO_FORMAT]


def parse_slurm_minutes(text: str, *, round_up: bool = False) -> int | None:
    """A Slurm duration in whole minutes (seconds round down, as a limit is read; `round_up`
    as Slurm counts a request): `30:00` → 30, `2:00:00` → 120, `1-00:00:00` → 1440, `45` → 45
    (a bare number is minutes). `infinite` → None."""
    value = text.strip()
    if value.lower() in ("infinite", "unlimited"):
        return None
    match = _SLURM_TIME.match(value)
    if match is None:
        raise ValueError(f"not a Slurm time: {text!r}")
    parts = {key: int(number) for key, number in match.groupdict().items() if number is not None}
    if "days" in parts:
        seconds = parts["days"] * 86400 + parts["dh"] * 3600 + parts.get("dm", 0) * 60
        seconds += parts.get("ds", 0)
    elif "h" in parts:
        seconds = parts["h"] * 3600 + parts["m"] * 60 + parts["s"]
    else:
        seconds = parts["mm"] * 60 + parts.get("ss", 0)
    return -(-seconds // 60) if round_up else seconds // 60


def parse_sinfo_partitions(text: str) -> dict[str, int | None]:
    """Partition → time limit in minutes (None: no limit) from `sinfo -h -o '%R %l'`.
    A partition whose limit sinfo reports as `n/a` is left out: no request can be proven to
    fit it. The default partition's `*` (printed by %P) is dropped."""
    limits: dict[str, int | None] = {}
    for line in lines_of(text):
        words = line.split()
        if len(words) != 2:
            raise UnparseableOutput(f"sinfo line {line!r}: expected 'PARTITION LIMIT'")
        name, limit_text = words[0].rstrip("*"), words[1]
        if limit_text.lower() == "n/a":
            continue
        try:
            limit = parse_slurm_minutes(limit_text)
        except ValueError:
            raise UnparseableOutput(f"sinfo line {line!r}: bad time limit") from None
        if name in limits:
            # One partition over several lines (nodes in different states): keep the smaller
            # limit (None is none at all), so a request is never told it fits when it may not.
            previous = limits[name]
            if limit is None or (previous is not None and previous < limit):
                limit = previous
        limits[name] = limit
    return limits


class RateLimit(Struct, frozen=True):
    """slurmctld's per-user RPC token bucket (Slurm 23.02+, `rl_enable` in
    SlurmctldParameters): `bucket` tokens at most, `refill` more every `period` seconds."""

    bucket: int
    refill: int
    period: int

    @property
    def per_second(self) -> float:
        return self.refill / self.period


#: slurmctld's defaults for the rl_* parameters not given (slurm.conf man page).
_RL_DEFAULTS: Final = {"rl_bucket_size": 30, "rl_refill_rate": 2, "rl_refill_period": 1}


_CONFIG_LINE = re.compile(r"(\w+)\s*=\s*(.*?)\s*")


def parse_config(text: str) -> dict[str, str]:
    """`scontrol show config` as key -> value (the header line and blank lines dropped)."""
    found: dict[str, str] = {}
    for line in lines_of(text):
        match = _CONFIG_LINE.fullmatch(line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def parse_rate_limit(slurmctld_parameters: str) -> RateLimit | None:
    """The RPC rate limit SlurmctldParameters sets, or None when `rl_enable` is not among
    them. A value that is missing, not a number or not positive falls back to the default,
    as slurmctld itself does."""
    words = [w.strip() for w in slurmctld_parameters.split(",")]
    if "rl_enable" not in words:
        return None
    values = dict(_RL_DEFAULTS)
    for word in words:
        key, sep, value = word.partition("=")
        if sep and key in values and value.strip().isdigit() and int(value) > 0:
            values[key] = int(value)
    return RateLimit(values["rl_bucket_size"], values["rl_refill_rate"], values["rl_refill_period"])
