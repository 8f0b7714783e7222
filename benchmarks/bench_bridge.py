"""A short evaluation through the evaluation bridge against the same `vibesys run` directly,
side by side in one run.

A local session (`vibesys session serve --local`, started once: a session serves a campaign's
many evaluations) and `vibesys-eval -- sleep S` (a fresh helper process each time, as an
evaluator runs it) against `vibesys run -- sleep S` (a fresh vibesys process each time), in
turn, with a bare `sleep S` for reference. Each helper's evaluation runs in a fresh copy of
the candidate's snapshot (a small workspace here), as every bridge evaluation does.

Target (issue 22): the bridge's wall time <= 1.1x the direct run's, S = 1 s (`--quick`:
S = 0.2 s, 2 rounds, figures that mean little).
Checks: every run exits 0, every bridge result says COMPLETED with the command's output
before it, the session's teardown exits 0.

    .venv/bin/python benchmarks/bench_bridge.py [--quick] [--dir DIR]
"""

from __future__ import annotations

import json
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
    compile_vibesys,
    interleave,
    median,
    parse_args,
    read_document,
    report,
    vibesys_argv,
)

WALL_TARGET = 1.1


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    rounds, seconds = (2, 0.2) if args.quick else (15, 1.0)
    compile_vibesys()
    verdicts = Verdicts()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="vibesys-bench-bridge-") as scratch:
        base = Path(scratch)
        workspace = make_workspace(base / "ws")
        direct = base / "direct"
        shutil.copytree(workspace, direct)
        # A Unix socket's path is ~100 bytes at most and --dir can be deep: the session's
        # state (its socket) lives in a short directory of its own.
        state = Path(tempfile.mkdtemp(prefix="vbb-"))
        try:
            session = start_session(base, workspace, state)
            measure(verdicts, session, workspace, direct, rounds, seconds)
        finally:
            shutil.rmtree(state, ignore_errors=True)
    return verdicts.finish()


def make_workspace(path: Path) -> Path:
    (path / "src").mkdir(parents=True)
    (path / "eval.py").write_text("print('score', 1)\n")
    for index in range(20):
        (path / "src" / f"m{index}.py").write_text(f"VALUE = {index}\n" * 50)
    return path


class Session:
    def __init__(self, process: subprocess.Popen[str], document: dict[str, Any]) -> None:
        self.process = process
        self.document = document
        self.problems: list[str] = []

    def stop(self) -> int:
        self.process.terminate()
        _, err = self.process.communicate(timeout=120)
        if self.process.returncode != 0:
            self.problems.append(f"session exit {self.process.returncode}: {err[-300:]}")
        return self.process.returncode


def start_session(base: Path, workspace: Path, state: Path) -> Session:
    argv = [
        *vibesys_argv(),
        "session",
        "serve",
        "--local",
        "--run-id",
        "bench-bridge",
        "--workspace",
        str(workspace),
        "--journal",
        str(base / "bridge" / ".vibesys" / "journal.db"),
        "--state-dir",
        str(state),
    ]
    process = subprocess.Popen(
        argv,
        cwd=base,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return Session(process, read_document(process))


def measure(
    verdicts: Verdicts,
    session: Session,
    workspace: Path,
    direct: Path,
    rounds: int,
    seconds: float,
) -> None:
    command = ["sleep", f"{seconds:g}"]
    helper_env = clean_env(**session.document["environment"])
    client = session.document["bridge"]["client"]
    problems: list[str] = []

    def through_bridge() -> float:
        argv = [sys.executable, client, "--", "sh", "-c", f"echo ran; {' '.join(command)}"]
        start = time.perf_counter()
        done = subprocess.run(
            argv, cwd=workspace, env=helper_env, capture_output=True, text=True, check=False
        )
        wall = time.perf_counter() - start
        lines = done.stdout.splitlines()
        result = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
        if done.returncode != 0 or result.get("status") != "COMPLETED" or lines[0] != "ran":
            problems.append(f"bridge exit {done.returncode}: {done.stderr[-300:]}")
        return wall

    def directly() -> float:
        argv = [*vibesys_argv(), "run", "--", "sh", "-c", f"echo ran; {' '.join(command)}"]
        start = time.perf_counter()
        done = subprocess.run(
            argv, cwd=direct, env=clean_env(), capture_output=True, text=True, check=False
        )
        wall = time.perf_counter() - start
        if done.returncode != 0 or done.stdout != "ran\n":
            problems.append(f"run exit {done.returncode}: {done.stderr[-300:]}")
        return wall

    def bare() -> float:
        start = time.perf_counter()
        subprocess.run(command, check=True)
        return time.perf_counter() - start

    try:
        through_bridge()  # the session's first evaluation opens what it keeps open
        bridge, run = interleave(rounds, through_bridge, directly)
        plain = [bare() for _ in range(3)]
    finally:
        session.stop()
    problems += session.problems
    ratio = median(bridge) / median(run)
    report(
        [
            (f"bare {' '.join(command)} (median of 3)", f"{median(plain):.3f} s"),
            (f"vibesys run -- sleep (median of {rounds})", f"{median(run):.3f} s"),
            (f"vibesys-eval -- sleep (median of {rounds})", f"{median(bridge):.3f} s"),
            ("bridge over direct run", f"{median(bridge) - median(run):+.3f} s"),
            ("direct run over bare", f"{median(run) - median(plain):+.3f} s"),
        ]
    )
    verdicts.check("runs_complete", not problems, "; ".join(problems[:3]) or "all completed")
    verdicts.ratio("bridge_vs_run", ratio, f"(target <= {WALL_TARGET})")
    verdicts.target("bridge_wall", ratio <= WALL_TARGET, f"wall ratio {ratio:.2f} <= {WALL_TARGET}")


if __name__ == "__main__":
    raise SystemExit(main())
