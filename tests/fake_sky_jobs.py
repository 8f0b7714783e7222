"""The fake `sky`'s jobs as local processes (fake_sky.py imports this from its own directory):
whether one is alive, its status from its rc file, when it ended, and its process tree."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from typing import Any


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, IndexError):
        return False


def job_status(job: dict[str, Any]) -> str:
    if job.get("cancelled"):
        return "CANCELLED"
    rc_file = Path(job["rc_file"])
    if rc_file.exists() and rc_file.read_text().strip():
        return "SUCCEEDED" if rc_file.read_text().strip() == "0" else "FAILED"
    if alive(job["pid"]):
        return "RUNNING"
    return "FAILED_DRIVER"


def ended_at(job: dict[str, Any]) -> float | None:
    rc_file = Path(job["rc_file"])
    return rc_file.stat().st_mtime if rc_file.exists() else None


def kill(job: dict[str, Any]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(job["pid"], signal.SIGTERM)


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return found
