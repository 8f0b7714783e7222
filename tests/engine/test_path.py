"""The path of `vibesys run --adapter sbatch -- true` through the package, as it runs: the
vibesys frames on the stack when `sbatch` is called and when the status round that ends the
run is asked. It stays short (at most 15 files, no file entered more than 4 times on one
stack), and `docs/architecture.md` draws it: one line per hop, in order.

Slurm is faked by three scripts on PATH: `sbatch` runs the batch script at once as job 7 (so
the job's own markers say how it ended), `squeue` and `sacct` know no job."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
MAX_FILES = 15
MAX_ENTRIES = 4

#: Runs the command line in this process, recording the vibesys frames at each Slurm call.
TRACER = """
import json, subprocess, sys, traceback
root, out_path = sys.argv[1], sys.argv[2]
stacks = {}
popen = subprocess.Popen.__init__
def traced(self, args, *rest, **kwargs):
    text = " ".join(args) if isinstance(args, (list, tuple)) else str(args)
    for word in ("sbatch", "squeue"):
        if word in text:
            frames = [f.filename[len(root) + 1:] for f in traceback.extract_stack()[:-1]]
            stacks.setdefault(word, []).append([f for f in frames if f.startswith("vibesys/")])
            break
    return popen(self, args, *rest, **kwargs)
subprocess.Popen.__init__ = traced
import vibesys.cli.main
sys.argv = ["vibesys", *sys.argv[3:]]
code = 0
try:
    vibesys.cli.main.main()
except SystemExit as exc:
    code = exc.code
with open(out_path, "w") as out:
    json.dump({"code": code, "stacks": stacks}, out)
"""

SBATCH = """#!/bin/sh
SLURM_JOB_ID=7 sh "$2" >/dev/null 2>&1
echo 7
"""


def _entries(stack: list[str]) -> list[str]:
    """The files of a stack, one per entry (consecutive frames in one file are one entry)."""
    runs: list[str] = []
    for name in stack:
        if not runs or runs[-1] != name:
            runs.append(name)
    return runs


def _traced_run(tmp_path: Path) -> dict[str, list[list[str]]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(SBATCH)
    for name in ("squeue", "sacct", "scancel"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
    for script in bin_dir.iterdir():
        script.chmod(0o755)
    config = tmp_path / "slurm.toml"
    config.write_text(
        f'[slurm]\nname = "fake"\nremote_workspace_root = "{tmp_path / "remote"}"\n'
        "poll_initial_seconds = 0.2\npoll_max_seconds = 1\n"
        '[slurm.transport]\nkind = "local"\n'
    )
    out = tmp_path / "stacks.json"
    tracer = tmp_path / "tracer.py"
    tracer.write_text(TRACER)
    journal = tmp_path / "journal" / "journal.db"
    argv = ["run", "--journal", str(journal), "--adapter", "sbatch"]
    argv += ["--slurm-config", str(config), "--", "true"]
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env.pop("VIBESYS_FAILPOINTS", None)
    done = subprocess.run(
        [sys.executable, str(tracer), str(ROOT), str(out), *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    traced = json.loads(out.read_text())
    assert traced["code"] in (0, None), done.stderr
    stacks: dict[str, list[list[str]]] = traced["stacks"]
    return stacks


def _path(stacks: dict[str, list[list[str]]]) -> list[str]:
    """The hops in order: down to `sbatch`, then (from where the two stacks part) down to the
    status round that ended the run."""
    submit, status = _entries(stacks["sbatch"][0]), _entries(stacks["squeue"][-1])
    shared = 0
    while shared < min(len(submit), len(status)) and submit[shared] == status[shared]:
        shared += 1
    return submit + status[shared:]


def _drawn() -> list[str]:
    """The files the architecture's drawing of the path names, one hop a line, in order."""
    text = DOC.read_text()
    section = text.split("### The engine's path", 1)[1].split("\n#", 1)[0]
    return [
        f"vibesys/{m.group(1)}"
        for m in re.finditer(r"^\d+\. `([a-z_/]+\.py)`", section, re.MULTILINE)
    ]


def test_the_path_from_the_command_line_to_sbatch_and_back_stays_short(tmp_path: Path) -> None:
    stacks = _traced_run(tmp_path)
    assert stacks.get("sbatch") and stacks.get("squeue"), stacks
    for word, stack in (("sbatch", stacks["sbatch"][0]), ("status", stacks["squeue"][-1])):
        entries = _entries(stack)
        files = Counter(entries)
        assert len(files) <= MAX_FILES, (word, entries)
        assert max(files.values()) <= MAX_ENTRIES, (word, files.most_common(3))
    assert len(set(_path(stacks))) <= MAX_FILES, _path(stacks)
    drawn = _drawn()
    hops = iter(drawn)
    missing = [name for name in _path(stacks) if name not in hops]
    assert not missing, f"docs/architecture.md does not draw {missing} in order: {drawn}"
