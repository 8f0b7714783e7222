"""A short srun job is seen to end when its srun ends, not at the next poll: on the project's
local cluster, `vibesys run --adapter srun -- true` (its own process, a fresh interpreter) and
`vibesys-gpu -- true` through a running broker (confined by bubblewrap on the node) against a
bare `srun -p main true`, in turn, end to end (journal and confinement included).

The site configuration keeps its default poll settings: what is measured is the end seen at
srun's return, not a fast poll.

Targets (issue 36): the median of `vibesys run --adapter srun` within 0.4 s of the bare srun's
median, `vibesys-gpu` (a long-lived broker) within 0.15 s.
Checks: every run exits 0 and its invocation ends DONE; each job's end was recorded from its
srun's return (the Finished evidence names `srun exited`), not from a status round.

    .venv/bin/python benchmarks/bench_srun.py [--quick] [--dir DIR]
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from _common import (
    Verdicts,
    clean_env,
    cluster_env,
    compile_vibesys,
    median,
    ms,
    parse_args,
    report,
    vibesys_argv,
)

#: This benchmark runs jobs on the project's local Slurm cluster (tests mark it `slurm`).
NEEDS_CLUSTER = True

#: How far over a bare srun each may end, in seconds.
WITHIN = {"run": 0.4, "gpu": 0.15}


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    cluster_env()
    compile_vibesys()
    rounds = 3 if args.quick else 15
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="vibesys-bench-srun-") as scratch:
        return run(Path(scratch), rounds)


def site_config(base: Path) -> Path:
    remote = base / "remote"
    remote.mkdir()
    config = base / "slurm.toml"
    config.write_text(
        f'[slurm]\nname = "bench"\nremote_workspace_root = "{remote}"\n\n'
        '[slurm.transport]\nkind = "local"\n\n'
        '[vibesys.agent_gpu]\npartitions = ["main"]\nmax_gpus = 1\nmax_time_minutes = 10\n'
        "default_time_minutes = 5\n"
    )
    return config


def start_broker(
    base: Path, config: Path, state: Path
) -> tuple[subprocess.Popen[str], dict[str, str], str] | str:
    """A broker for the workspace `base/ws` keeping its socket in `state`: its process, the
    client's environment and the client's path; or why it did not start."""
    workspace = base / "ws"
    workspace.mkdir()
    broker = subprocess.Popen(
        [
            *vibesys_argv(),
            "broker",
            "serve",
            "--slurm-config",
            str(config),
            "--workspace",
            str(workspace),
            "--state-dir",
            str(state),
            "--journal",
            str(base / "broker.db"),
        ],
        cwd=base,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert broker.stdout is not None and broker.stderr is not None
    lines = [broker.stdout.readline() for _ in range(3)]
    if not all(" " in line for line in lines):
        broker.kill()
        _, err = broker.communicate(timeout=60)
        return f"the broker did not start: {' '.join(err.split())[-300:]}"
    threading.Thread(target=broker.stderr.read, daemon=True).start()  # its log, unread
    said = dict(line.split(" ", 1) for line in lines)
    env = clean_env(
        VIBESYS_GPU_SOCKET=said["socket"].strip(),
        VIBESYS_GPU_TOKEN=Path(said["token_file"].strip()).read_text().strip(),
    )
    return broker, env, said["client"].strip()


def run(base: Path, rounds: int) -> int:
    config = site_config(base)
    verdicts = Verdicts()
    # The broker's socket in a short path of its own: a Unix socket's path has ~100 bytes.
    with tempfile.TemporaryDirectory(prefix="vb-srun-") as state:
        started = start_broker(base, config, Path(state) / "broker")
        if isinstance(started, str):
            verdicts.check("runs_complete", False, started)
            return verdicts.finish()
        return measure(verdicts, base, config, started, rounds)


def measure(
    verdicts: Verdicts,
    base: Path,
    config: Path,
    started: tuple[subprocess.Popen[str], dict[str, str], str],
    rounds: int,
) -> int:
    broker, gpu_env, client = started
    problems: list[str] = []

    def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
        took = time.perf_counter() - start
        if done.returncode != 0:
            problems.append(f"{argv[-3:]} exited {done.returncode}: {done.stderr[-200:]}")
        return took

    journal = base / "run.db"
    ours = [*vibesys_argv(), "run", "--adapter", "srun", "--slurm-config", str(config)]
    ours += ["--journal", str(journal), "--", "true"]
    sides: dict[str, Callable[[], float]] = {
        "bare": lambda: timed(["srun", "-p", "main", "true"], base, clean_env()),
        "run": lambda: timed(ours, base, clean_env()),
        "gpu": lambda: timed([sys.executable, client, "--", "true"], base / "ws", gpu_env),
    }
    times: dict[str, list[float]] = {name: [] for name in sides}
    try:
        for name in sides:  # warm the caches of each once, uncounted
            sides[name]()
        problems.clear()
        order = list(sides)
        for index in range(rounds):
            for name in order[index % 3 :] + order[: index % 3]:
                times[name].append(sides[name]())
    finally:
        broker.terminate()
        broker.wait(timeout=60)
    bare, ran, gpu = (median(times[n]) for n in ("bare", "run", "gpu"))
    print(f"{rounds} rounds, the three in turn")
    report(
        [
            ("srun -p main true", ms(bare)),
            ("vibesys run --adapter srun -- true", ms(ran)),
            ("vibesys-gpu -- true (broker)", ms(gpu)),
        ]
    )
    seen = [_ends(journal), _ends(base / "broker.db")]
    ended = [e for found in seen for e in found]
    verdicts.check("runs_complete", not problems, "; ".join(problems[:3]) or "all exited 0")
    late = [e for e in ended if "srun exited" not in e]
    verdicts.check(
        "ends_seen_at_srun_return",
        bool(ended) and all(len(f) == rounds + 1 for f in seen) and not late,
        f"{len(ended) - len(late)} of {len(ended)} ends recorded from srun's return"
        + (f"; not: {late[0][:120]}" if late else ""),
    )
    for name, median_seconds in (("run", ran), ("gpu", gpu)):
        over = median_seconds - bare
        limit = WITHIN[name]
        verdicts.ratio(f"{name}_over_bare_srun_seconds", max(over, 0.0), f"(target <= {limit})")
        verdicts.target(
            f"{name}_within_bare_srun",
            over <= limit,
            f"{name} {ms(median_seconds).strip()} is {over:.3f} s over bare srun <= {limit}",
        )
    return verdicts.finish()


def _ends(journal: Path) -> list[str]:
    """The evidence of every recorded end (Finished) in `journal`, and of any invocation that
    did not end DONE."""
    if not journal.exists():
        return []
    with sqlite3.connect(journal) as conn:
        ends = [e for (e,) in conn.execute("SELECT evidence FROM history WHERE event='Finished'")]
        open_ = conn.execute("SELECT id, state FROM invocations WHERE state != 'DONE'").fetchall()
    return ends + [f"{i} ended {s}" for i, s in open_]


if __name__ == "__main__":
    os.environ.pop("VIBESYS_JOURNAL", None)
    raise SystemExit(main())
