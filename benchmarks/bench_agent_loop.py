"""The agent-loop example's overhead per evaluation round over the bare command, printed.

Runs `examples/agent_loop/host.py` on this host (`--local`: no slurm.toml, each evaluation
confined by bubblewrap to a copy of the candidate) in a scratch directory, as a user runs it,
and reads what it prints: each round's time as the sandboxed agent waited for `vibesys-eval`,
and the bare command's (`python3 solve.py` with nothing around it, the best of three). The
example itself says where the time goes (examples/agent_loop/README.md). For the figure on a
Slurm cluster, run the example with a slurm.toml.

No target (issue 37 asks for the figure, printed): RATIO lines give each round's time over the
bare command's. `--quick` runs the same (one run of the example, a few seconds).
Check: the example exits 0 with both rounds COMPLETED.

    .venv/bin/python benchmarks/bench_agent_loop.py [--quick] [--dir DIR]
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import ROOT, Verdicts, clean_env, compile_vibesys, parse_args, report

HOST = ROOT / "examples" / "agent_loop" / "host.py"
BARE = re.compile(r"^bare command \(.*\): ([0-9.]+) s$", re.M)
ROUND = re.compile(r"^round (\d): evaluation ([0-9.]+) s, .* overhead (-?[0-9.]+) s", re.M)


def main() -> int:
    parse_args(__doc__.splitlines()[0])  # --quick and --dir change nothing here
    compile_vibesys()
    verdicts = Verdicts()
    # Not under --dir: the session's sockets live under the example's working directory, and
    # a Unix socket's path is ~100 bytes at most.
    cwd = Path(tempfile.mkdtemp(prefix="vba-"))
    try:
        done = run_example(cwd)
    finally:
        shutil.rmtree(cwd, ignore_errors=True)
    measure(verdicts, done)
    return verdicts.finish()


def run_example(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = clean_env()
    env.pop("VIBESYS_SLURM_CONFIG", None)  # this host, whatever the caller's environment says
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, str(HOST)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def measure(verdicts: Verdicts, done: subprocess.CompletedProcess[str]) -> None:
    out = done.stdout
    bare = BARE.search(out)
    rounds = ROUND.findall(out)
    completed = done.returncode == 0 and bare is not None and len(rounds) == 2
    detail = "both rounds COMPLETED" if completed else f"exit {done.returncode}: {out[-300:]!r}"
    verdicts.check("agent_loop_completes", completed, detail)
    if not completed or bare is None:
        verdicts.ratio("round_vs_bare", 0.0, "(no figure: the example failed)")
        return
    bare_seconds = float(bare.group(1))
    rows = [("bare command (python3 solve.py, best of 3)", f"{bare_seconds:.3f} s")]
    for number, seconds, overhead in rounds:
        rows.append((f"round {number}: evaluation", f"{float(seconds):.2f} s"))
        rows.append((f"round {number}: overhead over the bare command", f"{float(overhead):.2f} s"))
    report(rows)
    for number, seconds, _ in rounds:
        verdicts.ratio(
            f"round{number}_vs_bare",
            float(seconds) / max(bare_seconds, 1e-3),
            "(informational: the evaluation's wall over the bare command's)",
        )


if __name__ == "__main__":
    raise SystemExit(main())
