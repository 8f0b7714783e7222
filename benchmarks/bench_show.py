"""`vibesys journal show` on a journal of 100,000 invocations against one of 10.

Both journals are built the same way (the real schema from `open_journal`, then plain SQL in one
transaction: every invocation DONE with one attempt and four history rows). The real CLI is run
as a subprocess many times, alternating between the two journals, and the medians compared.
The same lookup is also timed in-process (open_journal readonly + resolve + attempts + history +
rendering), which leaves out interpreter startup and shows what the journal's size costs.

Target (issue 2, Performance): the CLI median on 100,000 is at most 1.5x the one on 10.

    .venv/bin/python benchmarks/bench_show.py [--quick] [--dir DIR]
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

from _common import (
    Verdicts,
    build_journal,
    clean_env,
    filesystem_of,
    interleave,
    median,
    ms,
    parse_args,
    report,
    us,
    vibesys_argv,
)

TARGET = 1.5
SMALL = 10


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    large, cli_reps, inproc_reps = (2_000, 3, 20) if args.quick else (100_000, 25, 300)
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="vibesys-bench-show-") as scratch:
        return run(Path(scratch), large, cli_reps, inproc_reps)


def run(scratch: Path, large: int, cli_reps: int, inproc_reps: int) -> int:
    from vibesys.journal_schema import open_journal, verify_journal

    journals: dict[int, tuple[Path, str]] = {}
    for count in (SMALL, large):
        path = scratch / f"j{count}" / "journal.db"
        path.parent.mkdir()
        start = time.perf_counter()
        ids = build_journal(path, count)
        built = time.perf_counter() - start
        target_id = ids[len(ids) // 2]  # from the middle: no edge-of-index luck
        journals[count] = (path, target_id)
        size_mb = path.stat().st_size / 1e6
        print(f"built journal of {count:>7,} invocations in {built:6.2f} s ({size_mb:.1f} MB)")

    # The synthetic rows are what vibesys itself records: the small journal must verify.
    verdicts = Verdicts()
    small_store = open_journal(journals[SMALL][0], readonly=True)
    problems = verify_journal(small_store)
    small_store.close()
    detail = f"verify: {problems[0]}" if problems else "journal verify clean"
    if not verdicts.check("synthetic_journal_verifies", not problems, detail):
        return verdicts.finish()
    wrong: list[str] = []  # every `show` must print the invocation it was asked for

    env = clean_env()
    argv = vibesys_argv()

    def cli(count: int) -> float:
        path, target_id = journals[count]
        command = [*argv, "journal", "show", target_id, "--journal", str(path)]
        start = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - start
        if done.returncode != 0 or target_id not in done.stdout:
            wrong.append(f"CLI on {count:,}: exit {done.returncode} {done.stderr.strip()[:200]}")
        return elapsed

    def in_process(count: int) -> float:
        from vibesys.cli.render import show

        path, target_id = journals[count]
        start = time.perf_counter()
        store = open_journal(path, readonly=True)
        inv = store.invocations.resolve(target_id)
        text = show(inv, store.invocations.attempts(inv.id), store.invocations.history(inv.id))
        store.close()
        elapsed = time.perf_counter() - start
        if target_id not in text:
            wrong.append(f"in-process on {count:,}: {target_id} not shown")
        return elapsed

    cli(SMALL), cli(large)  # warm the page cache and the interpreter's bytecode cache
    cli_small, cli_large = interleave(cli_reps, lambda: cli(SMALL), lambda: cli(large))
    for _ in range(5):
        in_process(SMALL), in_process(large)
    in_small, in_large = interleave(
        inproc_reps, lambda: in_process(SMALL), lambda: in_process(large)
    )

    cli_ratio = median(cli_large) / median(cli_small)
    in_ratio = median(in_large) / median(in_small)
    how = "the vibesys console script" if len(argv) == 1 else "python -m vibesys"
    print(f"journals on a {filesystem_of(scratch)} file system; CLI run as {how}")
    print(f"CLI: {cli_reps} runs per journal, alternating; in-process: {inproc_reps} per journal")
    report(
        [
            (f"CLI journal show, {SMALL:,} invocations", ms(median(cli_small))),
            (f"CLI journal show, {large:,} invocations", ms(median(cli_large))),
            (f"in-process show, {SMALL:,} invocations", us(median(in_small))),
            (f"in-process show, {large:,} invocations", us(median(in_large))),
        ]
    )
    verdicts.check(
        "show_prints_the_invocation",
        not wrong,
        f"{len(wrong)} wrong shows" + (f"; first: {wrong[0]}" if wrong else ""),
    )
    verdicts.ratio("in_process_show_large_vs_small", in_ratio, "(informational)")
    verdicts.ratio(
        "cli_show_large_vs_small", cli_ratio, f"({large:,} vs {SMALL:,}; target <= {TARGET})"
    )
    verdicts.target("show_ratio", cli_ratio <= TARGET, f"show ratio {cli_ratio:.2f} <= {TARGET}")
    return verdicts.finish()


if __name__ == "__main__":
    raise SystemExit(main())
