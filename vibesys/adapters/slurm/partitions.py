"""Choosing the partition of an agent's srun job, as the operator configured it.

Preference order comes from `[vibesys.agent_gpu] partitions`. A partition is used only if its
time limit, as `sinfo` reports it, fits the request. When a `windows_command` is configured,
the first fitting partition whose window starts the job now wins; a failing or unreadable
windows command only drops that preference.

The windows command prints JSON, either `{"main": true, "priority": false}` or a list such as
`[{"partition": "main", "starts_now": true}]`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vibesys.errors import SubmitRejected


def parse_windows(text: str) -> dict[str, bool]:
    """Partition → whether its window starts a job now; {} when the output is unreadable."""
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError:
        return {}
    if isinstance(data, dict):
        return {str(k): v for k, v in data.items() if isinstance(v, bool)}
    if isinstance(data, list):
        found: dict[str, bool] = {}
        for item in data:
            if isinstance(item, dict) and isinstance(item.get("starts_now"), bool):
                found[str(item.get("partition"))] = item["starts_now"]
        return found
    return {}


def choose_partition(
    preferred: Sequence[str],
    time_minutes: int,
    limits: Mapping[str, int | None],
    windows: Callable[[], dict[str, bool]] | None = None,
) -> tuple[str, str]:
    """The partition to use and why. SubmitRejected when no preferred partition fits."""
    fitting = [
        p
        for p in preferred
        if p in limits and (limits[p] is None or time_minutes <= (limits[p] or 0))
    ]
    if not fitting:
        known = ", ".join(
            f"{p} {'unlimited' if limits[p] is None else f'{limits[p]} min'}"
            if p in limits
            else f"{p} (no limit reported by sinfo)"
            for p in preferred
        )
        raise SubmitRejected(f"no partition fits --time {time_minutes}: {known}")
    if windows is not None:
        open_now = windows()
        for partition in fitting:
            if open_now.get(partition):
                return partition, f"{partition}: fits {time_minutes} min and its window is open"
    return fitting[0], f"{fitting[0]}: first preferred partition that fits {time_minutes} min"
