"""The real `vibesys` command, run in a subprocess as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def vibesys_cli(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    stdin: int | None = subprocess.DEVNULL,
) -> subprocess.CompletedProcess[str]:
    """Run the real `vibesys` command in a subprocess, as a user would."""
    full_env = {**os.environ, **(env or {})}
    if "VIBESYS_FAILPOINTS" not in (env or {}):
        full_env.pop("VIBESYS_FAILPOINTS", None)
    return subprocess.run(
        [sys.executable, "-m", "vibesys", *args],
        cwd=cwd,
        env=full_env,
        text=True,
        capture_output=True,
        timeout=timeout,
        stdin=stdin,
    )
