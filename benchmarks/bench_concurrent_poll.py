"""Concurrent evaluations on the project's local cluster: N `vibesys run` processes started at
once (each its own evaluation, as a user would run them, in one project directory) against
submitit with the same N jobs submitted from one process, side by side in one run.

Both sides run `sleep S` N times on partition main. Scheduler commands are counted by logging
shims on PATH (each logs its name, then execs the real client): status calls are squeue and
sacct (and `scontrol show job`, which neither uses). submitit comes from PyPI into the
benchmark's own virtual environment (created on first use under the user's cache directory,
never a project dependency).

Targets (issues 11 and 21): vibesys's status calls <= submitit's + 2, and wall time <= 1.1x
submitit's, for N = 12 and N = 32, each `vibesys run` in its own process (`--quick`: N = 4,
S = 1, figures that mean little).
Checks: every run ends DONE with exit 0, every submitit result arrives, and each status round
of vibesys was one squeue shared by the processes (squeue calls == rounds recorded).

    .venv/bin/python benchmarks/bench_concurrent_poll.py [--quick] [--dir DIR]
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from _common import (
    Verdicts,
    clean_env,
    cluster_env,
    compile_vibesys,
    median,
    parse_args,
    report,
    run_together,
    vibesys_argv,
)

#: This benchmark submits to the project's local Slurm cluster (tests mark it `slurm`).
NEEDS_CLUSTER = True

SUBMITIT = "submitit==1.5.4"
CLIENTS = ("squeue", "sacct", "sbatch", "scancel", "scontrol", "sinfo")
STATUS = ("squeue", "sacct")
STATUS_SLACK = 2
WALL_TARGET = 1.1

SUBMITIT_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import submitit

    count, seconds, folder = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    executor = submitit.SlurmExecutor(folder=folder)
    executor.update_parameters(time=5, partition="main", cpus_per_task=1)
    jobs = [executor.submit(time.sleep, seconds) for _ in range(count)]
    results = [job.result() for job in jobs]
    print("OK", len([r for r in results if r is None]))
    """
)


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    cluster_env()
    sizes, seconds, reps = ((4,), 1.0, 1) if args.quick else ((12, 32), 5.0, 2)
    python = submitit_python()
    compile_vibesys()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="vibesys-bench-poll-") as scratch:
        base = Path(scratch)
        shims = logging_shims(base)
        verdicts = Verdicts()
        for count in sizes:
            compare(verdicts, base, shims, python, count, seconds, reps)
    return verdicts.finish()


def submitit_python() -> Path:
    """The python of the benchmark's own environment with submitit (made once, then reused)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    venv = cache / "vibesys-bench" / "submitit-venv"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", SUBMITIT],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return python


def logging_shims(base: Path) -> Path:
    directory = base / "shims"
    directory.mkdir()
    for client in CLIENTS:
        real = shutil.which(client)
        assert real, f"{client} not found: is the local Slurm cluster installed?"
        shim = directory / client
        shim.write_text(
            f'#!/bin/sh\necho "{client} $*" >> "$VIBESYS_BENCH_LOG"\nexec {real} "$@"\n'
        )
        shim.chmod(0o755)
    return directory


def calls_in(log: Path) -> list[list[str]]:
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


def status_calls(calls: list[list[str]]) -> int:
    return sum(1 for c in calls if c[0] in STATUS or c[:3] == ["scontrol", "show", "job"])


def run_vibesys(
    base: Path, shims: Path, count: int, seconds: float, tag: str
) -> tuple[float, list[list[str]], list[str], int]:
    """N concurrent `vibesys run`: (wall, scheduler calls, problems, rounds recorded)."""
    cwd = base / f"vibesys-{tag}"
    cwd.mkdir()
    config = cwd / "slurm.toml"
    config.write_text(
        '[slurm]\nname = "bench"\n'
        f'remote_workspace_root = "{cwd / "remote"}"\n\n[slurm.transport]\nkind = "local"\n'
    )
    log = cwd / "calls.log"
    env = clean_env(PATH=f"{shims}:{os.environ['PATH']}", VIBESYS_BENCH_LOG=str(log))
    argv = [
        *vibesys_argv(),
        "run",
        "--adapter",
        "sbatch",
        "--slurm-config",
        str(config),
        "--time",
        "5",
        "--",
        "sleep",
        f"{seconds:g}",
    ]
    wall, problems = run_together([argv] * count, cwd, env)
    with sqlite3.connect(cwd / ".vibesys" / "journal.db") as conn:
        rows = conn.execute("SELECT round FROM poll_sites").fetchall()
        done = conn.execute(
            "SELECT count(*) FROM invocations WHERE state='DONE' AND exit_code=0"
        ).fetchone()[0]
    if done != count:
        problems.append(f"{done} of {count} invocations DONE with exit 0")
    return wall, calls_in(log), problems, sum(r[0] for r in rows)


def run_submitit(
    base: Path, shims: Path, python: Path, count: int, seconds: float, tag: str
) -> tuple[float, list[list[str]], list[str]]:
    cwd = base / f"submitit-{tag}"
    cwd.mkdir()
    script = cwd / "submit.py"
    script.write_text(SUBMITIT_SCRIPT)
    log = cwd / "calls.log"
    env = clean_env(PATH=f"{shims}:{os.environ['PATH']}", VIBESYS_BENCH_LOG=str(log))
    start = time.perf_counter()
    done = subprocess.run(
        [str(python), str(script), str(count), f"{seconds:g}", str(cwd / "jobs")],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    wall = time.perf_counter() - start
    problems = []
    if done.returncode != 0 or done.stdout.split() != ["OK", str(count)]:
        problems.append(f"submitit exit {done.returncode}: {done.stderr[-300:]}")
    return wall, calls_in(log), problems


def compare(
    verdicts: Verdicts,
    base: Path,
    shims: Path,
    python: Path,
    count: int,
    seconds: float,
    reps: int,
) -> None:
    ours: list[tuple[float, int]] = []
    theirs: list[tuple[float, int]] = []
    problems: list[str] = []
    shared = True
    for rep in range(reps):
        order = ("vibesys", "submitit") if rep % 2 == 0 else ("submitit", "vibesys")
        for side in order:
            tag = f"{count}-{rep}"
            if side == "vibesys":
                wall, calls, found, rounds = run_vibesys(base, shims, count, seconds, tag)
                squeues = sum(1 for c in calls if c[0] == "squeue")
                shared = shared and squeues == rounds
                ours.append((wall, status_calls(calls)))
            else:
                wall, calls, found = run_submitit(base, shims, python, count, seconds, tag)
                theirs.append((wall, status_calls(calls)))
            problems += found
    our_wall, their_wall = median([w for w, _ in ours]), median([w for w, _ in theirs])
    our_calls = max(c for _, c in ours)
    their_calls = min(c for _, c in theirs)
    ratio = our_wall / their_wall
    report(
        [
            (f"N={count}: vibesys wall (median of {reps})", f"{our_wall:.2f} s"),
            (f"N={count}: submitit wall (median of {reps})", f"{their_wall:.2f} s"),
            (f"N={count}: vibesys status calls (most)", str(our_calls)),
            (f"N={count}: submitit status calls (fewest)", str(their_calls)),
            (f"N={count}: vibesys status calls, every run", str([c for _, c in ours])),
            (f"N={count}: submitit status calls, every run", str([c for _, c in theirs])),
        ]
    )
    verdicts.check(f"runs_complete_n{count}", not problems, "; ".join(problems) or "all done")
    verdicts.check(
        f"one_squeue_per_shared_round_n{count}",
        shared,
        "every vibesys status round was one squeue shared by the processes",
    )
    verdicts.ratio(f"wall_vs_submitit_n{count}", ratio, f"(target <= {WALL_TARGET})")
    verdicts.target(
        f"wall_n{count}", ratio <= WALL_TARGET, f"wall ratio {ratio:.2f} <= {WALL_TARGET}"
    )
    verdicts.target(
        f"status_calls_n{count}",
        our_calls <= their_calls + STATUS_SLACK,
        f"{our_calls} status calls <= submitit's {their_calls} + {STATUS_SLACK}",
    )


if __name__ == "__main__":
    raise SystemExit(main())
