"""A short evaluation through a `vibesys.Session` against the same `vibesys run` directly, side
by side in one run.

The benchmark is the framework: it opens a local `vibesys.Session` once (a session serves a
campaign's many evaluations), then runs `vibesys-eval -- sh -c 'echo ran; sleep S'` with the
session's environment (a fresh helper process each time, as an agent runs it) against
`vibesys run -- sh -c 'echo ran; sleep S'` (a fresh vibesys process each time), in turn, with a
bare `sleep S` for reference. `bench_bridge.py` measures the same through `vibesys session
serve` started by hand; this one goes through the Python API a framework uses.

Target (issue 37): the session's wall time <= 1.0x the direct run's, S = 1 s, 15 rounds
(`--quick`: S = 0.2 s, 2 rounds, figures that mean little).
Checks: every run exits 0 and every session result says COMPLETED with the command's output
before it; the session closes with status 0 and leaves no socket.

    .venv/bin/python benchmarks/bench_session.py [--quick] [--dir DIR]
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import (
    Verdicts,
    clean_env,
    compile_vibesys,
    interleave,
    median,
    parse_args,
    report,
    vibesys_argv,
)
from bench_bridge import make_workspace

from vibesys.session import Session

WALL_TARGET = 1.0


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    rounds, seconds = (2, 0.2) if args.quick else (15, 1.0)
    compile_vibesys()
    verdicts = Verdicts()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="vibesys-bench-session-") as scratch:
        base = Path(scratch)
        workspace = make_workspace(base / "ws")
        direct = base / "direct"
        shutil.copytree(workspace, direct)
        # A Unix socket's path is ~100 bytes at most and --dir can be deep: the session's
        # state (its socket) lives in a short directory of its own.
        state = Path(tempfile.mkdtemp(prefix="vbs-"))
        try:
            measure(verdicts, base, workspace, direct, state, rounds, seconds)
        finally:
            shutil.rmtree(state, ignore_errors=True)
    return verdicts.finish()


def measure(
    verdicts: Verdicts,
    base: Path,
    workspace: Path,
    direct: Path,
    state: Path,
    rounds: int,
    seconds: float,
) -> None:
    command = f"echo ran; sleep {seconds:g}"
    problems: list[str] = []
    session = Session(
        "bench-session",
        workspace,
        local=True,
        journal=base / "session" / ".vibesys" / "journal.db",
        state_dir=state,
        log=lambda _line: None,
    )
    with session:
        helper_env = clean_env(**session.environment)
        helper = str(session.clients["vibesys-eval"])

        def through_session() -> float:
            argv = [sys.executable, helper, "--", "sh", "-c", command]
            start = time.perf_counter()
            done = subprocess.run(
                argv, cwd=workspace, env=helper_env, capture_output=True, text=True, check=False
            )
            wall = time.perf_counter() - start
            lines = done.stdout.splitlines()
            result = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
            if done.returncode != 0 or result.get("status") != "COMPLETED" or lines[0] != "ran":
                problems.append(f"session exit {done.returncode}: {done.stderr[-300:]}")
            return wall

        def directly() -> float:
            argv = [*vibesys_argv(), "run", "--", "sh", "-c", command]
            start = time.perf_counter()
            done = subprocess.run(
                argv, cwd=direct, env=clean_env(), capture_output=True, text=True, check=False
            )
            wall = time.perf_counter() - start
            if done.returncode != 0 or done.stdout != "ran\n":
                problems.append(f"run exit {done.returncode}: {done.stderr[-300:]}")
            return wall

        through_session()  # the session's first evaluation opens what it keeps open
        evaluated, run = interleave(rounds, through_session, directly)
    status = session.close()
    sockets = [p for p in state.rglob("*") if p.is_socket()]
    plain = [bare(seconds) for _ in range(3)]
    ratio = median(evaluated) / median(run)
    report(
        [
            (f"bare sleep {seconds:g} (median of 3)", f"{median(plain):.3f} s"),
            (f"vibesys run (median of {rounds})", f"{median(run):.3f} s"),
            (f"Session + vibesys-eval (median of {rounds})", f"{median(evaluated):.3f} s"),
            ("session over direct run", f"{median(evaluated) - median(run):+.3f} s"),
            ("direct run over bare", f"{median(run) - median(plain):+.3f} s"),
        ]
    )
    verdicts.check("runs_complete", not problems, "; ".join(problems[:3]) or "all completed")
    verdicts.check(
        "session_closes_clean",
        status == 0 and not sockets,
        f"close() returned {status}, {len(sockets)} sockets left",
    )
    verdicts.ratio("session_vs_run", ratio, f"(target <= {WALL_TARGET})")
    verdicts.target(
        "session_wall", ratio <= WALL_TARGET, f"wall ratio {ratio:.2f} <= {WALL_TARGET}"
    )


def bare(seconds: float) -> float:
    start = time.perf_counter()
    subprocess.run(["sleep", f"{seconds:g}"], check=True)
    return time.perf_counter() - start


if __name__ == "__main__":
    raise SystemExit(main())
