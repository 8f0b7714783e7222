"""The profilers the live profile tests give a Slurm site: py-spy from its wheel, and a
"profiler" that writes its capture as it starts (a cancel finds it there)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

#: Busy for `seconds` in a function of its own, so the samples name it.
PROGRAM = """
import sys, time
def spin_here(until):
    while time.monotonic() < until:
        sum(i * i for i in range(1000))
spin_here(time.monotonic() + float(sys.argv[1]))
print("spun")
"""

EARLY = 'echo started > "$0" && exec "$@"'


def profiler_tables(root: Path) -> str:
    """The site file's lines for `py-spy` (its binary copied into `root/tools`, which GPU jobs
    may read) and `early`."""
    beside = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    found = shutil.which("py-spy", path=beside)
    assert found, "py-spy is a dev dependency (pip install -e '.[dev]')"
    (root / "tools").mkdir(parents=True)
    spy = str(shutil.copy(found, root / "tools" / "py-spy"))
    command = [spy, "record", "--format", "speedscope", "--rate", "200", "-o", "{capture}.json"]
    return (
        f"read_only_paths = {json.dumps([str(root / 'tools')])}\n\n"
        + "[vibesys.agent_gpu.profilers.py-spy]\n"
        + f"command = {json.dumps([*command, '--'])}\n"
        + 'captures = ["{capture}.json"]\n'
        + "[vibesys.agent_gpu.profilers.early]\n"
        + f"command = {json.dumps(['sh', '-c', EARLY, '{capture}.json'])}\n"
        + 'captures = ["{capture}.json"]\n'
    )
