"""Peak memory of `vibesys run` while the command writes 200 MB to stdout.

The command writes 200 MB in 1 MB chunks; `vibesys run` streams it live from the job's log file
to its own stdout, which goes to /dev/null. The job itself runs in its own session under the
local wrapper, so the figure that matters is the `vibesys` process alone. It is measured three
ways:

- VmHWM of the vibesys process read by itself at exit (an `atexit` hook in a launcher that runs
  the typer app `vibesys.cli.app.main` in the same process): the exact figure, and the target;
- VmHWM of the real console script polled from /proc while it runs (a cross-check);
- ru_maxrss from wait4() on that process: an upper bound, since it also folds in the
  descendants vibesys reaped (the wrapper, and through it the command).

Side by side, the same run with a command that writes nothing is the baseline: the ratio says
how much of the peak the 200 MB add. A second run pipes vibesys's stdout back here and counts the
bytes, to check that all of them arrived.

Target (issue 2, Performance): peak RSS of the vibesys process < 100 MB.

    .venv/bin/python benchmarks/bench_memory.py [--quick] [--dir DIR]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

from _common import Verdicts, clean_env, parse_args, report, vibesys_argv

TARGET_MB = 100.0
CHUNK = 1 << 20

WRITER = "import sys; b = b'x' * {chunk}; w = sys.stdout.buffer.write\nfor _ in range({n}): w(b)"

#: Runs `vibesys.cli.app.main` in this very process and records its VmHWM when it exits.
LAUNCHER = textwrap.dedent(
    """
    import atexit, sys
    out, args = sys.argv[1], sys.argv[2:]

    def record():
        with open("/proc/self/status") as status:
            hwm = [line.split()[1] for line in status if line.startswith("VmHWM:")][0]
        with open(out, "w") as handle:
            handle.write(hwm)

    atexit.register(record)
    sys.argv = ["vibesys", *args]
    from vibesys.cli.app import main
    main()
    """
)


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    megabytes = 20 if args.quick else 200
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="vibesys-bench-memory-") as scratch:
        return run(Path(scratch), megabytes)


def vm_hwm_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def measure(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, int, int, float]:
    """Run argv with stdout to /dev/null: (exit status, polled VmHWM KiB, ru_maxrss KiB, secs)."""
    peak = 0
    start = time.perf_counter()
    with open(os.devnull, "wb") as devnull:
        child = subprocess.Popen(argv, stdout=devnull, stderr=subprocess.PIPE, env=env, cwd=cwd)
        stop = threading.Event()

        def poll() -> None:
            nonlocal peak
            while not stop.is_set():
                seen = vm_hwm_kb(child.pid)
                if seen is not None:
                    peak = max(peak, seen)
                stop.wait(0.01)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        assert child.stderr is not None
        errors = child.stderr.read()
        # wait4 reaps the child and gives its rusage; Popen must not reap it first.
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        stop.set()
        poller.join()
        child.stderr.close()
    elapsed = time.perf_counter() - start
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])}... exited {child.returncode}: {errors.decode()}")
    return child.returncode, peak, usage.ru_maxrss, elapsed


def run(scratch: Path, megabytes: int) -> int:
    env = clean_env()
    journal = scratch / "journal.db"
    hwm_file = scratch / "hwm.txt"
    cases = {"200 MB" if megabytes == 200 else f"{megabytes} MB": megabytes, "0 MB": 0}
    rows: list[tuple[str, str]] = []
    exact: dict[int, float] = {}
    for label, size in cases.items():
        command = [sys.executable, "-c", WRITER.format(chunk=CHUNK, n=size)]
        run_args = ["run", "--journal", str(journal), "--", *command]
        # 1. The exact figure: the vibesys process reads its own high-water mark at exit.
        measure([sys.executable, "-c", LAUNCHER, str(hwm_file), *run_args], env, scratch)
        exact[size] = int(hwm_file.read_text()) / 1024
        # 2. and 3. The real console script, polled from outside, and wait4's upper bound.
        _, polled, maxrss, elapsed = measure([*vibesys_argv(), *run_args], env, scratch)
        rows += [
            (f"{label}: VmHWM of vibesys at exit", f"{exact[size]:7.1f} MB"),
            (f"{label}: VmHWM of vibesys, polled", f"{polled / 1024:7.1f} MB"),
            (f"{label}: ru_maxrss incl. reaped children", f"{maxrss / 1024:7.1f} MB"),
            (f"{label}: wall time", f"{elapsed:7.2f} s"),
        ]
    report(rows)

    # Every byte must arrive: read vibesys's stdout through a pipe and count it.
    expected = megabytes * CHUNK
    command = [sys.executable, "-c", WRITER.format(chunk=CHUNK, n=megabytes)]
    argv = [*vibesys_argv(), "run", "--journal", str(journal), "--", *command]
    received = 0
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as child:
        assert child.stdout is not None and child.stderr is not None
        while chunk := child.stdout.read(CHUNK):
            received += len(chunk)
        child.stderr.read()
    print(f"piped run: {received:,} of {expected:,} bytes arrived, exit {child.returncode}")

    peak = exact[megabytes]
    ratio = peak / exact[0]
    verdicts = Verdicts()
    verdicts.check(
        "all_bytes_arrive",
        child.returncode == 0 and received == expected,
        f"{received:,} of {expected:,} bytes arrived, exit {child.returncode}",
    )
    verdicts.check(
        "peak_rss_bounded", peak < TARGET_MB, f"peak RSS {peak:.1f} MB < {TARGET_MB:.0f} MB"
    )
    verdicts.ratio(f"peak_rss_{megabytes}mb_vs_0mb", ratio, f"(peak {peak:.1f} MB)")
    return verdicts.finish()


if __name__ == "__main__":
    raise SystemExit(main())
