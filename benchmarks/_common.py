"""Shared helpers for the benchmark scripts (not a benchmark itself).

Every benchmark prints its measured figures for people, then machine-readable lines (see
`Verdicts`): `CHECK` for correctness (bytes lost, forbidden imports, bytes re-sent...),
`TARGET` for performance targets, `RATIO` for figures measured side by side, and one final
`PASS` or `FAIL` line. Exit status: 0 when every check and target is met, 1 otherwise.
`tests/test_benchmarks_smoke.py` runs each with `--quick` and fails on any failed CHECK;
timings (TARGET, RATIO) are never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing: find `vibesys` here
    sys.path.insert(0, str(ROOT))

#: Variables that would change what the CLI does under measurement (without bytecode caches,
#: every start compiles the package again: a user's installation keeps them).
_SCRUB = ("VIBESYS_JOURNAL", "VIBESYS_FAILPOINTS", "PYTHONDONTWRITEBYTECODE")


def parse_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="a small smoke run (seconds)")
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="where to put scratch files (default: a fresh temporary directory)",
    )
    return parser.parse_args()


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env.update(extra)
    return env


def vibesys_argv() -> list[str]:
    """How a user starts vibesys: the console script next to this interpreter, if installed."""
    script = Path(sys.executable).with_name("vibesys")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "vibesys"]


def cluster_env() -> None:
    """Bring the project's local Slurm cluster up and take its environment (SLURM_CONF)."""
    import subprocess

    local_slurm = ROOT / "scripts" / "local-slurm"
    subprocess.run([str(local_slurm), "up"], check=True, stdout=subprocess.DEVNULL)
    env_file = subprocess.run(
        [str(local_slurm), "env"], check=True, capture_output=True, text=True
    ).stdout.strip()
    for line in Path(env_file).read_text().splitlines():
        if line.startswith("export "):
            key, _, value = line[len("export ") :].partition("=")
            os.environ[key] = value.strip("'\"")


def compile_vibesys() -> None:
    """Byte-compile the vibesys package before the runs, as installing it would: an editable
    checkout run with PYTHONDONTWRITEBYTECODE set would otherwise recompile every module it
    imports in every process, a cost no installed vibesys pays. (`__pycache__` is ignored by
    git.)"""
    import subprocess

    package = ROOT / "vibesys"
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)


def median(samples: Sequence[float]) -> float:
    return statistics.median(samples)


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def interleave(
    rounds: int, a: Callable[[], float], b: Callable[[], float]
) -> tuple[list[float], list[float]]:
    """Run `a` and `b` alternately, flipping which goes first each round, so slow phases of the
    machine hit both alike. Each callable returns one measured duration in seconds."""
    first: list[float] = []
    second: list[float] = []
    for index in range(rounds):
        if index % 2 == 0:
            first.append(a())
            second.append(b())
        else:
            second.append(b())
            first.append(a())
    return first, second


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.2f} ms"


def us(seconds: float) -> str:
    return f"{seconds * 1e6:8.1f} us"


def report(rows: Iterable[tuple[str, str]]) -> None:
    rows = list(rows)
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}", flush=True)


class Verdicts:
    """The machine-readable lines of one benchmark run, one per line on stdout:

        CHECK <name> PASS|FAIL <detail>    correctness: a smoke run fails on FAIL
        TARGET <name> PASS|FAIL <detail>   a performance target: informational in a smoke run
        RATIO <name> <value> <detail>      a figure measured side by side in this run
        PASS|FAIL <summary>                the last line; `finish()` returns the exit status

    Names are `[a-z0-9_]+`, stable across runs, so a reader can pin them.
    """

    def __init__(self) -> None:
        self.failed: list[str] = []
        self.count = 0

    def check(self, name: str, ok: bool, detail: str) -> bool:
        return self._line("CHECK", name, ok, detail)

    def target(self, name: str, ok: bool, detail: str) -> bool:
        return self._line("TARGET", name, ok, detail)

    def ratio(self, name: str, value: float, detail: str = "") -> None:
        _check_name(name)
        print(f"RATIO {name} {value:.2f} {detail}".rstrip(), flush=True)

    def finish(self) -> int:
        if self.failed:
            print(f"FAIL {', '.join(self.failed)}", flush=True)
            return 1
        print(f"PASS all {self.count} checks and targets met", flush=True)
        return 0

    def _line(self, kind: str, name: str, ok: bool, detail: str) -> bool:
        _check_name(name)
        self.count += 1
        if not ok:
            self.failed.append(f"{kind.lower()} {name}")
        print(f"{kind} {name} {'PASS' if ok else 'FAIL'} {detail}", flush=True)
        return ok


def _check_name(name: str) -> None:
    if not name or not all(c.islower() or c.isdigit() or c == "_" for c in name):
        raise ValueError(f"verdict names are [a-z0-9_]+: {name!r}")


def filesystem_of(path: Path) -> str:
    from vibesys.journal_schema.store import filesystem_type

    return filesystem_type(path) or "unknown"


# -- synthetic journals ---------------------------------------------------------------------


def build_journal(path: Path, count: int, *, seed: int = 7) -> list[str]:
    """A journal of `count` finished invocations, written fast with plain SQL in one transaction.

    The schema comes from `open_journal` (the real migrations). Each invocation is DONE /
    COMPLETED with one attempt and the four history rows a successful local run records
    (SubmitIntended, Submitted, Finished, Collected), encoded by the real event codec, so the
    result passes `vibesys journal verify`. Returns the invocation ids in insertion order.
    """
    from vibesys.journal_schema import Settings, encode_event, iso, job_name, open_journal
    from vibesys.states import (
        Collected,
        Event,
        FailureClass,
        Finished,
        JobState,
        Outcome,
        SubmitIntended,
        Submitted,
    )

    open_journal(path).close()
    rng = random.Random(seed)
    ids: list[str] = []
    seen: set[str] = set()
    while len(ids) < count:
        candidate = f"{rng.getrandbits(48):012x}"
        if candidate not in seen:
            seen.add(candidate)
            ids.append(candidate)
    base = datetime(2025, 1, 1, tzinfo=UTC)
    run_root = path.parent / "runs"
    invocations = []
    attempts = []
    history = []
    steps = (
        (JobState.PREPARED, JobState.SUBMITTING),
        (JobState.SUBMITTING, JobState.RUNNING),
        (JobState.RUNNING, JobState.COLLECTING),
        (JobState.COLLECTING, JobState.DONE),
    )
    for index, invocation_id in enumerate(ids):
        at = [iso(base + timedelta(seconds=index, microseconds=step)) for step in range(5)]
        name = job_name(invocation_id, 1)
        invocation_dir = f"{run_root}/{invocation_id}"
        pid = str(10_000 + index % 50_000)
        events: tuple[Event, ...] = (
            SubmitIntended(1, name),
            Submitted(pid, f"local pid {pid} in {invocation_dir}/1"),
            Finished(FailureClass.COMPLETED, 0, f"COMPLETED job {pid} exit 0: marker exit_code=0"),
            Collected(Outcome.COMPLETED, 0, f"logs in {invocation_dir}/1: stdout 12 bytes"),
        )
        invocations.append(
            (
                invocation_id,
                json.dumps(["python", "eval.py", "--shard", str(index)]),
                JobState.DONE,
                Outcome.COMPLETED,
                FailureClass.COMPLETED,
                invocation_dir,
                at[0],
                at[4],
            )
        )
        attempts.append((invocation_id, name, pid, FailureClass.COMPLETED, at[1], at[2]))
        for seq, ((src, dst), event) in enumerate(zip(steps, events, strict=True), start=1):
            kind, evidence = encode_event(event)
            history.append((invocation_id, seq, src, dst, kind, evidence, at[seq]))
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous=OFF")  # building only; readers see the same file
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO invocations (id, label, adapter, command, request, state, version,"
            " attempt, max_retries, retries, outcome, exit_code, failure_class,"
            " cancel_requested, invocation_dir, created_at, updated_at, settings)"
            " VALUES (?, NULL, 'local', ?, '{}', ?, 4, 1, 2, 0, ?, 0, ?, 0, ?, ?, ?, ?)",
            [(*row, Settings().dumps()) for row in invocations],
        )
        conn.executemany(
            "INSERT INTO attempts (invocation_id, attempt, job_name, job_id, failure_class,"
            " intended_at, submitted_at) VALUES (?, 1, ?, ?, ?, ?, ?)",
            attempts,
        )
        conn.executemany(
            "INSERT INTO history (invocation_id, seq, from_state, to_state, event, evidence, at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            history,
        )
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return ids


def read_document(process: subprocess.Popen[str]) -> dict[str, Any]:
    """The JSON document `vibesys session serve` prints first (SystemExit if it ended)."""
    assert process.stdout is not None
    lines: list[str] = []
    while not lines or lines[-1] != "}\n":
        line = process.stdout.readline()
        if not line:
            _, err = process.communicate(timeout=60)
            raise SystemExit(f"session serve ended (exit {process.returncode}): {err[-500:]}")
        lines.append(line)
    document: dict[str, Any] = json.loads("".join(lines))
    return document


def run_together(
    argvs: Sequence[Sequence[str]], cwd: Path, env: dict[str, str], what: str = "exit"
) -> tuple[float, list[str]]:
    """Start every command at once, wait for all: the wall time and one line per failure."""
    start = time.perf_counter()
    runs = [
        subprocess.Popen(
            list(argv), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for argv in argvs
    ]
    finished = [run.communicate(timeout=600) for run in runs]
    wall = time.perf_counter() - start
    problems = [
        f"{what} {run.returncode}: {err.decode()[-200:]}"
        for run, (_, err) in zip(runs, finished, strict=True)
        if run.returncode != 0
    ]
    return wall, problems
