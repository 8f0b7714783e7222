"""What of a local job may still run once its wrapper is gone (read by the local adapter's
status and its cancel). The wrapper itself ends everything it started before it writes the
job's marker; this is for the wrapper that was killed, or that gave up on a process."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from vibesys.adapters.rundir.claim import Claim
from vibesys.osutil.proc import group_members, is_alive, session_members

#: The processes the wrapper killed but could not reap in time: "PID START_TIME" lines.
SURVIVORS_FILE = "survivors"


def left_running(directory: Path, claim: Claim) -> list[int]:
    """What of a job whose wrapper is gone still runs: its command's process group, the
    wrapper's session (what did not `setsid` out of it) and what the wrapper gave up on
    (`survivors`). What left the session while the wrapper was killed is out of reach."""
    group = _read_json(directory / "group")
    found: set[int] = set()
    if "pgid" in group:
        found.update(group_members(int(group["pgid"]), group.get("start_time")))
    if group.get("sid") == int(claim.get("pid") or 0):  # the wrapper led its own session
        found.update(session_members(group["sid"], claim.get("start_time") or None))
    with contextlib.suppress(OSError, ValueError):
        for line in (directory / SURVIVORS_FILE).read_text(encoding="ascii").splitlines():
            survivor, _, started = line.partition(" ")
            if is_alive(int(survivor), started):
                found.add(int(survivor))
    return sorted(found)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return loaded if isinstance(loaded, dict) else {}
