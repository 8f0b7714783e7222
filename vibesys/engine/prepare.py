"""A new invocation's id."""

from __future__ import annotations

import os
import time


def new_invocation_id() -> str:
    """16 hex digits: the creation time in milliseconds (11), then 20 random bits (5).

    Ids sort by creation, as Slurm's job ids do. That is also what the journal's b-trees want:
    the rows of the invocations being driven sit at the end of each table, in pages that
    stay warm, where random ids sent every commit to a cold page of its own and split pages
    all over the tables (more pages, and more bytes of WAL, per transition)."""
    random_bits = int.from_bytes(os.urandom(3), "big") >> 4  # 20 bits (no `secrets` import)
    return f"{time.time_ns() // 1_000_000:011x}{random_bits:05x}"
