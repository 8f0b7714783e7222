"""Many sbatch jobs from one Python process: `vibesys.Client` against submitit, side by side in
one run on the project's local cluster.

Both sides are one process that submits N jobs of `sleep S` on partition main and waits for
every result: `Client.submit(..., adapter="sbatch")` then `handle.result()` for each (the
handles' status rounds shared), and submitit's `SlurmExecutor.submit` then `job.result()`.
Scheduler commands are counted by logging shims on PATH, status calls as
`bench_concurrent_poll.py` counts them (squeue, sacct, `scontrol show job`); submitit comes from
PyPI into the same cached virtual environment as there.

Targets (issue 37): wall <= 1.0x submitit's and status calls <= submitit's, N = 32, S = 5,
two runs of each side, alternating (`--quick`: N = 4, S = 1, one run, figures that mean
little).
Checks: every result is COMPLETED with exit 0 on both sides, and each status round of the
client was one squeue (squeue calls == rounds recorded).

    .venv/bin/python benchmarks/bench_client_slurm.py [--quick] [--dir DIR]
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from _common import Verdicts, clean_env, cluster_env, compile_vibesys, median, parse_args, report
from bench_concurrent_poll import (
    calls_in,
    logging_shims,
    run_submitit,
    status_calls,
    submitit_python,
)

#: This benchmark submits to the project's local Slurm cluster (tests mark it `slurm`).
NEEDS_CLUSTER = True

WALL_TARGET = 1.0

#: The client's side: one process, N submissions, then every result.
CLIENT_SCRIPT = textwrap.dedent(
    """
    import sys
    from vibesys import Client

    count, seconds, config = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    with Client() as client:
        handles = [
            client.submit(["sleep", seconds], adapter="sbatch", slurm_config=config,
                          time_minutes=5, partition="main")
            for _ in range(count)
        ]
        results = [handle.result(timeout=600) for handle in handles]
    print("OK", sum(r.status == "COMPLETED" and r.exit_code == 0 for r in results))
    """
)


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    cluster_env()
    count, seconds, reps = (4, 1.0, 1) if args.quick else (32, 5.0, 2)
    python = submitit_python()
    compile_vibesys()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="vibesys-bench-client-") as scratch:
        base = Path(scratch)
        shims = logging_shims(base)
        verdicts = Verdicts()
        compare(verdicts, base, shims, python, count, seconds, reps)
    return verdicts.finish()


def run_client(
    base: Path, shims: Path, count: int, seconds: float, tag: str
) -> tuple[float, list[list[str]], list[str], int]:
    """One process submitting N jobs through `vibesys.Client`: (wall, scheduler calls,
    problems, status rounds recorded)."""
    cwd = base / f"client-{tag}"
    cwd.mkdir()
    config = cwd / "slurm.toml"
    config.write_text(
        '[slurm]\nname = "bench"\n'
        f'remote_workspace_root = "{cwd / "remote"}"\n\n[slurm.transport]\nkind = "local"\n'
    )
    script = cwd / "submit.py"
    script.write_text(CLIENT_SCRIPT)
    log = cwd / "calls.log"
    env = clean_env(PATH=f"{shims}:{os.environ['PATH']}", VIBESYS_BENCH_LOG=str(log))
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(script), str(count), f"{seconds:g}", str(config)],
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
        problems.append(f"client exit {done.returncode}: {done.stdout[-200:]} {done.stderr[-300:]}")
    with sqlite3.connect(cwd / ".vibesys" / "journal.db") as conn:
        rounds = sum(r[0] for r in conn.execute("SELECT round FROM poll_sites"))
    return wall, calls_in(log), problems, rounds


def compare(
    verdicts: Verdicts, base: Path, shims: Path, python: Path, count: int, seconds: float, reps: int
) -> None:
    ours: list[tuple[float, int]] = []
    theirs: list[tuple[float, int]] = []
    problems: list[str] = []
    shared = True
    for rep in range(reps):
        order = ("client", "submitit") if rep % 2 == 0 else ("submitit", "client")
        for side in order:
            tag = f"{count}-{rep}"
            if side == "client":
                wall, calls, found, rounds = run_client(base, shims, count, seconds, tag)
                shared = shared and sum(1 for c in calls if c[0] == "squeue") == rounds
                ours.append((wall, status_calls(calls)))
            else:
                wall, calls, found = run_submitit(base, shims, python, count, seconds, tag)
                theirs.append((wall, status_calls(calls)))
            problems += found
    our_wall, their_wall = median([w for w, _ in ours]), median([w for w, _ in theirs])
    our_calls, their_calls = max(c for _, c in ours), min(c for _, c in theirs)
    ratio = our_wall / their_wall
    report(
        [
            (f"N={count}: vibesys.Client wall (median of {reps})", f"{our_wall:.2f} s"),
            (f"N={count}: submitit wall (median of {reps})", f"{their_wall:.2f} s"),
            (f"N={count}: vibesys.Client status calls, every run", str([c for _, c in ours])),
            (f"N={count}: submitit status calls, every run", str([c for _, c in theirs])),
        ]
    )
    verdicts.check(f"runs_complete_n{count}", not problems, "; ".join(problems) or "all done")
    verdicts.check(
        f"one_squeue_per_round_n{count}", shared, "every status round of the client was one squeue"
    )
    verdicts.ratio(f"wall_vs_submitit_n{count}", ratio, f"(target <= {WALL_TARGET})")
    verdicts.target(
        f"wall_n{count}", ratio <= WALL_TARGET, f"wall ratio {ratio:.2f} <= {WALL_TARGET}"
    )
    verdicts.target(
        f"status_calls_n{count}",
        our_calls <= their_calls,
        f"{our_calls} status calls (most) <= submitit's {their_calls} (fewest)",
    )


if __name__ == "__main__":
    raise SystemExit(main())
