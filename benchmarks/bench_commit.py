"""Cost of `Journal.commit_transition` against a bare sqlite3 single-row write.

The baseline is the cheapest durable write SQLite offers with the journal's own settings: a
file database in WAL mode with synchronous=FULL and the same busy timeout, one
`BEGIN IMMEDIATE; INSERT one row; COMMIT` per operation. The journal side commits real, valid
transitions: for each new invocation (created outside the timed region) SubmitIntended,
Submitted, Finished, Collected, and only the `commit_transition` calls are timed.

The two sides alternate operation by operation (which one goes first flips every time), in
several rounds, so that noise from the machine hits both alike. Target (issue 11, cheaper
commits; issue 2 asked for 2.0): the ratio of the medians <= 1.3.

Informational lines break the cost down: the pure `decide()`, the re-read of the row that
`commit_transition` returns, both sides again with synchronous=OFF (the cost that is not the
disk's) and the bytes each commit appends to the WAL.

    .venv/bin/python benchmarks/bench_commit.py [--quick] [--dir DIR]
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from pathlib import Path

from _common import (
    Verdicts,
    filesystem_of,
    interleave,
    median,
    parse_args,
    percentile,
    report,
    us,
)

TARGET = 1.3


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    rounds, per_round = (4, 24) if args.quick else (30, 200)
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="vibesys-bench-commit-") as scratch:
        return run(Path(scratch), rounds, per_round)


def run(scratch: Path, rounds: int, per_round: int) -> int:
    from vibesys.engine import new_invocation_id
    from vibesys.journal_schema import job_name, open_journal, verify_journal
    from vibesys.journal_schema.store import BUSY_TIMEOUT_MS
    from vibesys.states import (
        Collected,
        Event,
        FailureClass,
        Finished,
        JobState,
        Outcome,
        SubmitIntended,
        Submitted,
        decide,
    )

    journal = open_journal(scratch / "journal.db")
    bare = sqlite3.connect(scratch / "bare.db", isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1e3)
    bare.execute("PRAGMA journal_mode=WAL")
    bare.execute("PRAGMA synchronous=FULL")
    bare.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    bare.execute("PRAGMA foreign_keys=ON")
    bare.execute(
        "CREATE TABLE rows (id INTEGER PRIMARY KEY, invocation_id TEXT NOT NULL,"
        " event TEXT NOT NULL, evidence TEXT NOT NULL, at TEXT NOT NULL)"
    )
    payload = '{"job_id": "12345", "observation": "local pid 12345 in runs/0123456789ab/1"}'

    def cycle(invocation_id: str) -> list[Event]:
        return [
            SubmitIntended(1, job_name(invocation_id, 1)),
            Submitted("12345", "local pid 12345"),
            Finished(FailureClass.COMPLETED, 0, "COMPLETED job 12345 exit 0: marker exit_code=0"),
            Collected(Outcome.COMPLETED, 0, "logs in runs: stdout 12 bytes"),
        ]

    pending: list[Event] = []
    current = None

    def next_invocation() -> None:
        """Start a new cycle when the last one is done (never timed: not a transition)."""
        nonlocal current, pending
        if not pending:
            invocation_id = new_invocation_id()
            current = journal.create_invocation(
                invocation_id=invocation_id,
                adapter="local",
                command=["python", "eval.py"],
                request={},
                label=None,
                max_retries=2,
                invocation_dir=str(scratch / "runs" / invocation_id),
            )
            pending = cycle(invocation_id)

    committed = 0

    def journal_op() -> float:
        nonlocal current, committed
        next_invocation()
        event = pending.pop(0)
        assert current is not None
        start = time.perf_counter()
        current, _ = journal.commit_transition(current, event)
        elapsed = time.perf_counter() - start
        committed += 1
        return elapsed

    counter = 0

    def bare_op() -> float:
        nonlocal counter
        counter += 1
        start = time.perf_counter()
        bare.execute("BEGIN IMMEDIATE")
        bare.execute(
            "INSERT INTO rows (invocation_id, event, evidence, at) VALUES (?, ?, ?, ?)",
            ("0123456789ab", "Submitted", payload, f"2025-01-01T00:00:{counter % 60:02d}"),
        )
        bare.execute("COMMIT")
        return time.perf_counter() - start

    # Warm up both (page cache, statement caches, the machine built once per process).
    for _ in range(8):
        journal_op()
        bare_op()

    journal_samples: list[float] = []
    bare_samples: list[float] = []
    round_ratios: list[float] = []
    for _ in range(rounds):
        j, b = interleave(per_round, journal_op, bare_op)
        journal_samples += j
        bare_samples += b
        round_ratios.append(median(j) / median(b))

    # Breakdown: the pure decision alone, on the same kind of events.

    states = [JobState.PREPARED, JobState.SUBMITTING, JobState.RUNNING, JobState.COLLECTING]
    decide_samples: list[float] = []
    for _ in range(200):
        for state, event in zip(states, cycle("0123456789ab"), strict=True):
            start = time.perf_counter()
            decide(state, event)
            decide_samples.append(time.perf_counter() - start)

    # ... and the re-read of the row that commit_transition returns.
    assert current is not None
    get_samples = []
    for _ in range(800):
        start = time.perf_counter()
        journal.invocations.get(current.id)
        get_samples.append(time.perf_counter() - start)

    # Informational: the same two operations without fsync (synchronous=OFF) show the cost that
    # is not the disk's, and with automatic checkpoints off the WAL's growth shows how many
    # bytes each commit writes. Not part of the ratio.
    nosync_ops = max(40, per_round)
    wal_bytes: dict[str, float] = {}
    nosync: dict[str, float] = {}
    sides = (
        ("journal", journal.conn, journal_op, next_invocation),
        ("bare", bare, bare_op, lambda: None),
    )
    for name, conn, op, setup in sides:
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        wal = scratch / f"{name}.db-wal"
        samples, grown = [], 0
        for _ in range(nosync_ops):
            setup()  # outside the measured growth: only the commit's own pages count
            before = wal.stat().st_size if wal.exists() else 0
            samples.append(op())
            grown += wal.stat().st_size - before
        nosync[name] = median(samples)
        wal_bytes[name] = grown / nosync_ops

    # What was timed must also be right: every commit recorded once, every history valid.
    problems = verify_journal(journal)
    recorded = journal.conn.execute("SELECT count(*) FROM history").fetchone()[0]
    journal.close()
    bare.close()

    j_med, b_med = median(journal_samples), median(bare_samples)
    ratio = j_med / b_med
    print(f"journal directory on a {filesystem_of(scratch)} file system")
    print(f"{rounds} rounds x {per_round} operations per side, alternating which side goes first")
    report(
        [
            ("commit_transition median", us(j_med)),
            ("commit_transition p90", us(percentile(journal_samples, 0.9))),
            ("bare sqlite3 median", us(b_med)),
            ("bare sqlite3 p90", us(percentile(bare_samples, 0.9))),
            ("  of which decide()", us(median(decide_samples)) + "  (pure, informational)"),
            ("  of which get() re-read", us(median(get_samples)) + "  (informational)"),
            ("per-round ratio median", f"{median(round_ratios):8.2f}"),
            ("without fsync: commit_transition", us(nosync["journal"]) + "  (informational)"),
            ("without fsync: bare sqlite3", us(nosync["bare"]) + "  (informational)"),
            ("WAL bytes per commit_transition", f"{wal_bytes['journal']:8.0f}"),
            ("WAL bytes per bare commit", f"{wal_bytes['bare']:8.0f}"),
        ]
    )
    verdicts = Verdicts()
    verdicts.check(
        "journal_verifies",
        not problems and recorded == committed,
        f"{recorded} history rows for {committed} commits; "
        + (f"verify: {problems[0]}" if problems else "journal verify clean"),
    )
    verdicts.ratio("commit_transition_vs_bare", ratio, f"(target <= {TARGET})")
    verdicts.target("commit_ratio", ratio <= TARGET, f"commit ratio {ratio:.2f} <= {TARGET}")
    return verdicts.finish()


if __name__ == "__main__":
    raise SystemExit(main())
