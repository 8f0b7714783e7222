"""What examples/agent_loop/host.py must show, on either site (this host, or the local Slurm
cluster): checked from its output and from outside, never from its own verdict alone."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import ROOT

HOST = ROOT / "examples" / "agent_loop" / "host.py"

#: Lines the run must print, whatever the site.
AGENT_LOOP_LINES = [
    # The sandbox: loopback only, nothing outside, the token file not even there to read.
    "agent | network: interfaces ['lo'], 1.1.1.1:53 unreachable",
    "agent | session token file: not readable (No such file or directory)",
    "agent |   results directory: not writable (Read-only file system)",
    "agent | second score better: True",
    "agent exit 0",
    "session closed: exit status 0, 0 sockets left, serve alive False",
]


def run_agent_loop(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    unset = ("VIBESYS_JOURNAL", "VIBESYS_FAILPOINTS", "VIBESYS_SLURM_CONFIG")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    # This checkout's vibesys, whether or not it is installed.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, str(HOST), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def check_agent_loop(done: subprocess.CompletedProcess[str], cwd: Path) -> list[str]:
    """Assert the two evaluations completed, the second scored better, the sandbox had no
    network nor the token, and nothing of the run is left running; the evaluations' job ids."""
    out = done.stdout
    assert done.returncode == 0, f"host.py exited {done.returncode}:\n{out}\n{done.stderr}"
    assert "Traceback" not in done.stderr
    for line in AGENT_LOOP_LINES:
        assert line in out, f"host.py did not print {line!r}:\n{out}"
    assert out.count("vibesys-eval exit 0: COMPLETED") == 2, out
    # One profile of the better candidate where the session offers a profiler; else it says so.
    profiled = "agent |   profile exit 0: COMPLETED" in out
    assert profiled or "agent | profile: no profiler offered in this session" in out, out
    assert not profiled or "its capture read back as recorded: True" in out, out
    scores = [float(s) for s in re.findall(r"^agent \| score \d: ([0-9.]+) ", out, re.M)]
    assert len(scores) == 2 and scores[1] > scores[0], out
    overheads = re.findall(r"^round \d: evaluation [0-9.]+ s, .* overhead -?[0-9.]+ s", out, re.M)
    assert len(overheads) == 2, out
    assert (cwd / ".vibesys" / "journal.db").is_file()
    # Nothing of this run outlived it: no process whose arguments or directory are under cwd
    # (the serve, the evaluations' wrappers, the sandbox all are).
    left = [pid for pid in os.listdir("/proc") if pid.isdigit() and _under(pid, str(cwd))]
    assert not left, f"still running under {cwd}: {left}"
    return re.findall(r"\[vibesys-eval\] started: attempt 1 on \S+, job (\d+)", out)


def _under(pid: str, path: str) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:  # gone meanwhile, or not ours to read
        return False
    return path in argv or cwd.startswith(path)
