"""Many campaigns evaluating at once through the evaluation bridge on the project's local
cluster, against the same number of direct `vibesys run --adapter sbatch` runs, side by side
in one run.

The bridge side: N sessions (`vibesys session serve --slurm-config`, one per campaign, each
with its own workspace, all in one project journal), started first; then one helper per
campaign, all at once, each `vibesys-eval -- sleep S`. The direct side: N `vibesys run
--adapter sbatch --candidate WORKSPACE -- sleep S` started at once in one project directory
(as `bench_concurrent_poll.py` runs them). Scheduler commands are counted by logging shims on
PATH (as there): status calls are squeue and sacct (and `scontrol show job`), counted on the
bridge side from the helpers' start to their end.

Target (issue 22): the bridge's status calls <= the direct runs', N = 32, S = 5, totals over
two runs of each side, alternating (`--quick`: one run each, N = 4, S = 1, figures that mean
little). The wall ratio (of the means) is informational.
Checks: every helper and every run ends COMPLETED with exit 0, every session's teardown exits
0.

    .venv/bin/python benchmarks/bench_bridge_slurm.py [--quick] [--dir DIR]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (
    Verdicts,
    clean_env,
    cluster_env,
    compile_vibesys,
    parse_args,
    read_document,
    report,
    run_together,
    vibesys_argv,
)
from bench_concurrent_poll import calls_in, logging_shims, status_calls

#: This benchmark submits to the project's local Slurm cluster (tests mark it `slurm`).
NEEDS_CLUSTER = True

#: One side's run: its wall time, its status calls, what went wrong.
Side = tuple[float, int, list[str]]


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    cluster_env()
    count, seconds, reps = (4, 1.0, 1) if args.quick else (32, 5.0, 2)
    compile_vibesys()
    verdicts = Verdicts()
    direct: list[Side] = []
    bridge: list[Side] = []
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="vibesys-bench-bridge-") as scratch:
        shims = logging_shims(Path(scratch))
        for rep in range(reps):
            base = Path(scratch) / f"rep-{rep}"
            base.mkdir()
            config = base / "slurm.toml"
            config.write_text(
                '[slurm]\nname = "bench"\n'
                f'remote_workspace_root = "{base / "remote"}"\n\n'
                '[slurm.transport]\nkind = "local"\n'
            )
            # A Unix socket's path is ~100 bytes at most and --dir can be deep: the
            # sessions' states (their sockets) live in a short directory of their own.
            states = Path(tempfile.mkdtemp(prefix="vbs-"))
            try:
                # Alternating which side goes first: a busy phase of the machine hits both.
                for side in ("direct", "bridge") if rep % 2 == 0 else ("bridge", "direct"):
                    if side == "direct":
                        direct.append(run_direct(base, shims, config, count, seconds))
                    else:
                        bridge.append(run_bridge(base, shims, config, states, count, seconds))
            finally:
                shutil.rmtree(states, ignore_errors=True)
    judge(verdicts, count, direct, bridge)
    return verdicts.finish()


def workspace(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "eval.py").write_text("print('score', 1)\n")
    return path


def env_for(shims: Path, log: Path, **extra: str) -> dict[str, str]:
    return clean_env(PATH=f"{shims}:{os.environ['PATH']}", VIBESYS_BENCH_LOG=str(log), **extra)


def run_direct(base: Path, shims: Path, config: Path, count: int, seconds: float) -> Side:
    """N concurrent `vibesys run --adapter sbatch`: (wall, status calls, problems)."""
    cwd = base / "direct"
    candidate = workspace(cwd / "ws")
    log = cwd / "calls.log"
    argv = [
        *vibesys_argv(),
        "run",
        "--adapter",
        "sbatch",
        "--slurm-config",
        str(config),
        "--time",
        "5",
        "--candidate",
        str(candidate),
        "--",
        "sleep",
        f"{seconds:g}",
    ]
    wall, problems = run_together([argv] * count, cwd, env_for(shims, log), "run exit")
    return wall, status_calls(calls_in(log)), problems


def start_session(
    base: Path, shims: Path, config: Path, state: Path, index: int, log: Path
) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    argv = [
        *vibesys_argv(),
        "session",
        "serve",
        "--slurm-config",
        str(config),
        "--no-check",
        "--default-timeout",
        "300",
        "--run-id",
        f"campaign-{index}",
        "--workspace",
        str(workspace(base / "bridge" / f"ws-{index}")),
        "--journal",
        str(base / "bridge" / ".vibesys" / "journal.db"),
        "--state-dir",
        str(state),
    ]
    process = subprocess.Popen(
        argv,
        cwd=base / "bridge",
        env=env_for(shims, log),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return process, read_document(process)


def run_bridge(
    base: Path, shims: Path, config: Path, states: Path, count: int, seconds: float
) -> Side:
    """N sessions, then N helpers at once: (helpers' wall, status calls, problems)."""
    (base / "bridge").mkdir()
    log = base / "bridge" / "calls.log"
    sessions = [start_session(base, shims, config, states / str(i), i, log) for i in range(count)]
    problems: list[str] = []
    try:
        log.unlink(missing_ok=True)  # what the helpers' evaluations cost, not the starts
        start = time.perf_counter()
        helpers = [
            subprocess.Popen(
                [sys.executable, doc["bridge"]["client"], "--", "sleep", f"{seconds:g}"],
                cwd=doc["workspace"],
                env=clean_env(**doc["environment"]),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _, doc in sessions
        ]
        for helper in helpers:
            out, err = helper.communicate(timeout=600)
            last = out.splitlines()[-1] if out.strip() else "{}"
            status = json.loads(last).get("status") if last.startswith("{") else None
            if helper.returncode != 0 or status != "COMPLETED":
                problems.append(f"helper exit {helper.returncode} ({status}): {err[-200:]}")
        wall = time.perf_counter() - start
        calls = status_calls(calls_in(log))
    finally:
        for process, _ in sessions:
            process.terminate()
        for process, _ in sessions:
            _, err = process.communicate(timeout=120)
            if process.returncode != 0:
                problems.append(f"session exit {process.returncode}: {err[-200:]}")
    return wall, calls, problems


def judge(verdicts: Verdicts, count: int, direct: list[Side], bridge: list[Side]) -> None:
    direct_wall = sum(wall for wall, _, _ in direct) / len(direct)
    bridge_wall = sum(wall for wall, _, _ in bridge) / len(bridge)
    # Status rounds vary by a round or two from run to run on both sides (how spread the
    # ends are): the totals over every run are compared.
    direct_calls = sum(calls for _, calls, _ in direct)
    bridge_calls = sum(calls for _, calls, _ in bridge)
    runs = len(direct)
    report(
        [
            (f"N={count}: direct runs' wall (mean of {runs})", f"{direct_wall:.2f} s"),
            (f"N={count}: bridge helpers' wall (mean of {runs})", f"{bridge_wall:.2f} s"),
            (f"N={count}: direct runs' status calls, every run", str([c for _, c, _ in direct])),
            (f"N={count}: bridge's status calls, every run", str([c for _, c, _ in bridge])),
        ]
    )
    problems = [p for _, _, found in direct + bridge for p in found]
    verdicts.check(f"runs_complete_n{count}", not problems, "; ".join(problems[:3]) or "all done")
    verdicts.ratio(f"status_calls_vs_direct_n{count}", bridge_calls / max(direct_calls, 1))
    verdicts.ratio(f"wall_vs_direct_n{count}", bridge_wall / direct_wall, "(informational)")
    verdicts.target(
        f"status_calls_n{count}",
        bridge_calls <= direct_calls,
        f"{bridge_calls} status calls <= the direct runs' {direct_calls} (over {runs} runs)",
    )


if __name__ == "__main__":
    raise SystemExit(main())
