"""Apply each named mutant (tests/mutation/mutants/) to a scratch copy of the checkout, run
its tests there, and report which were killed.

    scripts/mutants                  # every mutant, one worker per core
    scripts/mutants -k lease         # the mutants whose name contains "lease"
    scripts/mutants --list           # names and why, nothing run
    scripts/mutants --full           # the whole non-Slurm suite against each (slow)
    scripts/mutants --part 1-4/5     # four mutants of every five (--part 5/5: the fifth)
    scripts/mutants --record         # and keep each mutant's killer (killers.json) for next time

Each mutant first runs the one test that killed it last time (`killers.json`, written by
--record) when that test is among the mutant's own, so that most mutants cost one test; when
that test is gone or no longer fails, the mutant's whole test set runs, as without a record.
Either way a kill counts only if its test passes unmutated (below), so a killer must not be
flaky: one that fails by chance under a mutant and passes by chance unmutated is a false kill.

Each test gets TEST_SECONDS (a test's own `timeout` marker wins): a mutant that makes a test
wait for something that never comes is killed at that bound, not at the suite's 120 s.

A mutant is killed when its tests fail (pytest exit status 1, or any other failure such as
an import error or a hang cut short by the time limit). A kill counts only if what killed it
passes on an unmutated copy: after the mutants, the tests that failed under them (or, for a
kill no test is named for, the mutant's whole test set) run once more there, and must pass.
Exit status 0 when every mutant is killed and every mutant listed as equivalent survives; 1
otherwise (a survivor, an equivalent that was killed, a kill whose test fails unmutated, or a
mutant whose original text no longer occurs exactly once in its file). The unmutated run has
the same per-test bound, so a kill by that bound counts only if the test passes within it
unmutated; it is spread over the workers (pytest-xdist).

A scratch copy keeps the checkout's byte code (`__pycache__`, checked against each source's
time and size as usual) but the mutated file's, so no run compiles the package again.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgspec

if __package__ in (None, ""):  # run as a file: make `tests.mutation` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.mutation.mutants import MUTANTS, Mutant

ROOT = Path(__file__).resolve().parents[2]
#: What a scratch copy holds: the package and everything its tests read.
COPIED = ("vibesys", "tests", "docs", "examples", "benchmarks", "scripts", "pyproject.toml")
COPIED_FILES = ("README.md",)
IGNORED = shutil.ignore_patterns(".hypothesis", ".pytest_cache", "*.egg-info")
#: The test that killed each mutant when the check was last run with --record.
KILLERS = ROOT / "tests" / "mutation" / "killers.json"
#: pytest's exit status when tests ran and some failed (anything else: a usage error, a test
#: id that no longer exists, no test collected).
TESTS_FAILED = 1
#: The whole non-Slurm suite, for --full.
FULL = ("tests",)
RUN_LIMIT_SECONDS = 900
#: Each test's bound, over its mutant and unmutated (its own `timeout` marker wins): half
#: of the suite's. A test that needs longer unmutated shows as a void kill, never as a kill.
TEST_SECONDS = 60
_FAILED_TEST = re.compile(r"^(?:FAILED|ERROR) (.+?)(?: - |$)", re.MULTILINE)


class Outcome(msgspec.Struct, frozen=True):
    mutant: Mutant
    killed: bool
    seconds: float
    detail: str
    #: the tests that failed under the mutant (empty: none named, e.g. an import error)
    killers: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.killed != bool(self.mutant.equivalent)


def stale(mutants: Iterable[Mutant], root: Path = ROOT) -> list[str]:
    """Mutants whose original text does not occur exactly once in their file."""
    problems = []
    for mutant in mutants:
        path = root / mutant.file
        count = path.read_text(encoding="utf-8").count(mutant.original) if path.exists() else 0
        if count != 1:
            problems.append(f"{mutant.name}: its text occurs {count} times in {mutant.file}")
    return problems


def scratch_copy(into: Path, mutant: Mutant | None = None, root: Path = ROOT) -> Path:
    """A copy of the checkout under `into`, with `mutant` applied."""
    copy = into / "checkout"
    copy.mkdir()
    for name in COPIED:
        source = root / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=IGNORED, symlinks=True)
        elif source.exists():
            shutil.copy2(source, copy / name)
    for name in COPIED_FILES:
        if (root / name).exists():
            shutil.copy2(root / name, copy / name)
    if mutant is not None:
        target = copy / mutant.file
        text = target.read_text(encoding="utf-8")
        assert text.count(mutant.original) == 1, mutant.name
        target.write_text(text.replace(mutant.original, mutant.replacement), encoding="utf-8")
        for compiled in target.parent.glob(f"__pycache__/{target.stem}.*.pyc"):
            compiled.unlink()
    return copy


def run_tests(
    copy: Path, tests: Sequence[str], *, stop_first: bool = True, workers: int = 0
) -> subprocess.CompletedProcess[str]:
    """pytest on `tests` inside `copy`, importing the copy's `vibesys` (not the installed one);
    `workers` > 1 spreads them over that many pytest-xdist processes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIBESYS_")}
    env["PYTHONPATH"] = str(copy)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slurm"]
    argv += [f"--timeout={TEST_SECONDS}"]
    argv += ["-x"] if stop_first else []
    argv += ["-n", str(workers)] if workers > 1 else []
    try:
        return subprocess.run(
            [*argv, *tests],
            cwd=copy,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_LIMIT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout if isinstance(expired.stdout, str) else ""
        return subprocess.CompletedProcess(expired.cmd, -1, out + "\n(run cut short)", "")


def imports_the_copy(copy: Path) -> bool:
    env = {**os.environ, "PYTHONPATH": str(copy)}
    where = subprocess.run(
        [sys.executable, "-c", "import vibesys; print(vibesys.__file__)"],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return Path(where).resolve().is_relative_to(copy.resolve())


def try_mutant(mutant: Mutant, tests: Sequence[str], first: str | None = None) -> Outcome:
    """Run `mutant` against `tests`, or only against `first` (its last killer) when that
    fails under it."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="vibesys-mutant-") as scratch:
        copy = scratch_copy(Path(scratch), mutant)
        done = run_tests(copy, [first]) if first else None
        if done is None or done.returncode != TESTS_FAILED or not _FAILED_TEST.search(done.stdout):
            done = run_tests(copy, tests)
    seconds = time.monotonic() - started
    if done.returncode == 0:
        return Outcome(mutant, False, seconds, "all tests passed")
    failed = tuple(_FAILED_TEST.findall(done.stdout))
    if failed:
        detail = f"by {failed[0]}"
    else:
        tail = done.stdout.strip().splitlines()[-1:] or ["(no output)"]
        detail = f"pytest exit {done.returncode}: {tail[0]}"
    return Outcome(mutant, True, seconds, detail, failed)


def unmutated_failures(
    outcomes: Iterable[Outcome], tests_of: dict[str, tuple[str, ...]], workers: int = 0
) -> list[str]:
    """What killed a mutant must pass without it (else the kill would mean nothing): one
    problem line per mutant whose killing tests fail on an unmutated copy."""
    needed = {o.mutant.name: o.killers or tests_of[o.mutant.name] for o in outcomes if o.killed}
    if not needed:
        return []
    with tempfile.TemporaryDirectory(prefix="vibesys-mutant-base-") as scratch:
        copy = scratch_copy(Path(scratch))
        if not imports_the_copy(copy):
            return ["the scratch copy does not import its own vibesys"]
        tests = sorted({t for group in needed.values() for t in group})
        done = run_tests(copy, tests, stop_first=False, workers=workers)
    if done.returncode == 0:
        return []
    failing = set(_FAILED_TEST.findall(done.stdout))
    blamed = {
        name: sorted(f for f in failing if any(within(f, target) for target in group))
        for name, group in needed.items()
    }
    lines = [
        f"{name}: killed by {', '.join(found)}, which fails unmutated too"
        for name, found in blamed.items()
        if found
    ]
    # Not one test named: the run itself failed (a collection error, a hang cut short).
    return lines or [
        f"the kills' tests fail unmutated (pytest exit {done.returncode}):\n{done.stdout[-3000:]}"
    ]


def within(test_id: str, target: str) -> bool:
    """Whether pytest's `test_id` is `target` or one of the tests it selects."""
    target = target.rstrip("/")
    return test_id == target or test_id.startswith((target + "::", target + "/", target + "["))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="pattern", default="", help="only mutants whose name has this")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument("--full", action="store_true", help="the whole non-Slurm suite each")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel runs")
    parser.add_argument(
        "--record", action="store_true", help=f"write each killer to {KILLERS.name}"
    )
    parser.add_argument(
        "--part",
        type=part_of,
        default=None,
        help="K/N or K1-K2/N: the mutants whose place in the list, counted from 1, is K (or from "
        "K1 to K2) modulo N, so that the check can run in pieces",
    )
    args = parser.parse_args(argv)

    chosen = [m for m in MUTANTS if args.pattern in m.name]
    if args.part is not None:
        chosen = part(chosen, *args.part)
    if args.list:
        for mutant in chosen:
            extra = f"  [equivalent: {mutant.equivalent}]" if mutant.equivalent else ""
            print(f"{mutant.name:<38} {mutant.file}: {mutant.why}{extra}")
        return 0
    if not chosen:
        print(f"no mutant name contains {args.pattern!r}")
        return 1
    names = [m.name for m in MUTANTS]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    problems = [f"duplicate mutant names: {', '.join(duplicates)}"] if duplicates else []
    problems += stale(chosen)
    if problems:
        print("\n".join(problems))
        return 1

    started = time.monotonic()
    tests_of = {m.name: FULL if args.full else m.test_args() for m in chosen}
    killers = recorded_killers()
    first = {
        m.name: killer
        for m in chosen
        if (killer := killers.get(m.name)) and any(within(killer, t) for t in tests_of[m.name])
    }
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        outcomes = list(
            pool.map(lambda m: try_mutant(m, tests_of[m.name], first.get(m.name)), chosen)
        )
    for outcome in outcomes:
        print(line_for(outcome), flush=True)
    checked = time.monotonic()
    void = unmutated_failures(outcomes, tests_of, args.jobs)
    if void:
        print("\n".join(void), flush=True)
    if args.record and not void:
        record_killers(killers, outcomes)
    killed = sum(o.killed for o in outcomes)
    equivalent = sum(bool(o.mutant.equivalent) for o in outcomes)
    bad = [o for o in outcomes if not o.ok]
    print(
        f"{len(outcomes)} mutants: {killed} killed, {len(outcomes) - killed} survived "
        f"({equivalent} listed as equivalent); {len(bad)} wrong; {len(void)} kills void; "
        f"{time.monotonic() - started:.0f} s wall ({time.monotonic() - checked:.0f} s checking "
        f"the kills unmutated) on {args.jobs} workers"
    )
    return 1 if bad or void else 0


def recorded_killers(path: Path = KILLERS) -> dict[str, str]:
    if not path.exists():
        return {}
    return msgspec.json.decode(path.read_bytes(), type=dict[str, str])


def record_killers(
    known: dict[str, str], outcomes: Iterable[Outcome], path: Path = KILLERS
) -> None:
    """Keep the first test that killed each mutant (the others' records as they were)."""
    found = known | {o.mutant.name: o.killers[0] for o in outcomes if o.killed and o.killers}
    names = {m.name for m in MUTANTS}
    kept = {name: test for name, test in sorted(found.items()) if name in names}
    path.write_bytes(msgspec.json.format(msgspec.json.encode(kept), indent=1) + b"\n")


def part_of(text: str) -> tuple[range, int]:
    """`K/N` or `K1-K2/N` as (the places kept, N), for --part."""
    match = re.fullmatch(r"(\d+)(?:-(\d+))?/(\d+)", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not K/N or K1-K2/N")
    first, last, every = int(match[1]), int(match[2] or match[1]), int(match[3])
    if not 1 <= first <= last <= every:
        raise argparse.ArgumentTypeError(f"{text!r}: need 1 <= K1 <= K2 <= N")
    return range(first, last + 1), every


def part(mutants: Sequence[Mutant], kept: range, every: int) -> list[Mutant]:
    """The mutants whose place in `mutants`, counted from 1, is in `kept` modulo `every`."""
    return [m for place, m in enumerate(mutants) if place % every + 1 in kept]


def line_for(outcome: Outcome) -> str:
    mutant = outcome.mutant
    if mutant.equivalent:
        verdict = "equivalent" if not outcome.killed else "KILLED-BUT-LISTED-EQUIVALENT"
    else:
        verdict = "killed" if outcome.killed else "SURVIVED"
    why = mutant.equivalent if mutant.equivalent and not outcome.killed else mutant.why
    return f"{verdict:<12} {mutant.name:<38} {outcome.seconds:5.1f} s  {outcome.detail}  ({why})"


if __name__ == "__main__":
    raise SystemExit(main())
