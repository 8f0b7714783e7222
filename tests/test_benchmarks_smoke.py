"""Each benchmark runs in its --quick mode; every correctness check it prints must pass.

A benchmark prints machine-readable lines (benchmarks/README.md, `_common.Verdicts`):
`CHECK <name> PASS|FAIL ...` for correctness (bytes lost, forbidden imports, bytes re-sent on
re-stage...), `TARGET <name> PASS|FAIL ...` for performance targets, `RATIO <name> <value>`
for side-by-side figures, and a final `PASS`/`FAIL` line. Here a failed CHECK fails the test;
TARGET and RATIO lines are informational (the figures of a smoke run on a busy machine mean
nothing). Each benchmark's checks are pinned by name below, so none can silently disappear.
Benchmarks that declare `NEEDS_CLUSTER = True` touch the project's local Slurm cluster or its
sshd and carry the `slurm` marker.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = sorted((ROOT / "benchmarks").glob("bench_*.py"))

#: The correctness checks each benchmark must print (and pass) in a quick run.
EXPECTED_CHECKS = {
    "bench_agent_loop": {"agent_loop_completes"},
    "bench_bridge": {"runs_complete"},
    "bench_bridge_slurm": {"runs_complete_n4"},
    "bench_client_slurm": {"runs_complete_n4", "one_squeue_per_round_n4"},
    "bench_commit": {"journal_verifies"},
    "bench_memory": {"all_bytes_arrive", "peak_rss_bounded"},
    "bench_show": {"synthetic_journal_verifies", "show_prints_the_invocation"},
    "bench_slurm": {
        "reconcile_leaves_held_jobs_pending",
        "scheduler_commands_per_round",
        "runs_complete",
        "ssh_submit_is_one_round_trip",
        "ssh_status_round_is_one_round_trip",
    },
    "bench_snapshot": {
        "manifest_counts_the_content",
        "restage_reuses_the_snapshot",
        "restage_sends_no_bytes",
    },
    "bench_ssh_spool": {"copy_is_byte_identical", "peak_rss_bounded"},
    "bench_startup": {
        "help_runs",
        "help_imports_no_paramiko_sky_or_adapter",
        "journal_show_runs",
        "journal_show_imports_only_what_it_reads",
        "journal_list_runs",
        "journal_list_imports_only_what_it_reads",
        "logs_runs",
        "logs_imports_only_what_it_reads",
        "states_runs",
        "states_imports_only_what_it_reads",
        "run_true_runs",
        "run_imports_only_its_adapter",
        "baseline_app_runs",
    },
    "bench_concurrent_poll": {"runs_complete_n4", "one_squeue_per_shared_round_n4"},
    "bench_session": {"runs_complete", "session_closes_clean"},
    "bench_ui": {"page_lists_the_newest", "journal_unchanged", "filtered_pages_list_their_rows"},
    "bench_srun": {"runs_complete", "ends_seen_at_srun_return"},
}

VERDICT = re.compile(r"^(CHECK|TARGET) ([a-z0-9_]+) (PASS|FAIL)(?: (.*))?$")
RATIO = re.compile(r"^RATIO ([a-z0-9_]+) (\d+\.\d+)(?: .*)?$")
FINAL = re.compile(r"^(PASS|FAIL) .+$")
#: Lines that look like verdicts; each must parse as one of the above.
VERDICT_LIKE = re.compile(r"^(CHECK|TARGET|RATIO|PASS|FAIL)\b")


def needs_cluster(script: Path) -> bool:
    """Whether the script assigns `NEEDS_CLUSTER = True` at module level (read, not imported)."""
    for node in ast.parse(script.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "NEEDS_CLUSTER" for t in node.targets
        ):
            return isinstance(node.value, ast.Constant) and node.value.value is True
    return False


def _params() -> list[object]:
    return [
        pytest.param(path, id=path.stem, marks=[pytest.mark.slurm] if needs_cluster(path) else [])
        for path in BENCHMARKS
    ]


def judge(output: str, returncode: int) -> tuple[list[str], set[str]]:
    """Problems with one run's output, and the names of the checks it printed."""
    problems: list[str] = []
    checks: set[str] = set()
    failed = False
    ratios = 0
    lines = output.splitlines()
    for line in lines:
        if not VERDICT_LIKE.match(line):
            continue
        if verdict := VERDICT.match(line):
            kind, name, result = verdict.group(1, 2, 3)
            failed = failed or result == "FAIL"
            if kind == "CHECK":
                checks.add(name)
                if result == "FAIL":
                    problems.append(f"correctness check failed: {line}")
        elif RATIO.match(line):
            ratios += 1
        elif not (FINAL.match(line) and line is lines[-1]):
            problems.append(f"a verdict-like line that does not parse: {line!r}")
    if ratios == 0:
        problems.append("no RATIO line")
    if not checks:
        problems.append("no CHECK line")
    if not lines or not FINAL.match(lines[-1]):
        problems.append("the last line is not the final PASS/FAIL")
    elif lines[-1].startswith("FAIL") != failed:
        problems.append(f"the final line {lines[-1]!r} disagrees with the verdicts")
    # Exit status 0 when everything is met, 1 when something is missed; anything else crashed.
    if returncode != (1 if failed else 0):
        problems.append(f"exit status {returncode} with {'a' if failed else 'no'} failed verdict")
    return problems, checks


def test_there_are_benchmarks() -> None:
    assert {p.stem for p in BENCHMARKS} == set(EXPECTED_CHECKS)


def test_benchmarks_that_touch_the_cluster_say_so() -> None:
    touching = {
        p.stem
        for p in BENCHMARKS
        if re.search(
            r"local-slurm|sbatch|squeue|\bsrun\b|SshTransport|:2222|\b2222\b", p.read_text()
        )
    }
    declared = {p.stem for p in BENCHMARKS if needs_cluster(p)}
    assert (
        touching
        == declared
        == {
            "bench_bridge_slurm",
            "bench_client_slurm",
            "bench_concurrent_poll",
            "bench_slurm",
            "bench_srun",
            "bench_ssh_spool",
        }
    )


GOOD = """figures for people
CHECK bytes_arrive PASS 10 of 10 bytes
RATIO ours_vs_theirs 1.20 (target <= 1.5)
TARGET speed FAIL ratio 2.00 <= 1.5
FAIL target speed
"""


@pytest.mark.parametrize(
    ("output", "returncode", "problem"),
    [
        (GOOD, 1, None),
        (GOOD.replace("speed FAIL", "speed PASS").replace("FAIL target", "PASS all"), 0, None),
        (GOOD.replace("bytes_arrive PASS", "bytes_arrive FAIL"), 1, "correctness check failed"),
        (GOOD.replace("CHECK bytes_arrive PASS 10", "PASS 10"), 1, "does not parse"),
        (GOOD.replace("CHECK bytes_arrive PASS", "CHECK Bytes PASS"), 1, "does not parse"),
        (GOOD.replace("RATIO ours_vs_theirs 1.20", "ratio 1.20"), 1, "no RATIO line"),
        (GOOD.replace("CHECK bytes_arrive PASS 10 of 10 bytes\n", ""), 1, "no CHECK line"),
        (GOOD.replace("FAIL target speed\n", ""), 1, "the last line"),
        (GOOD.replace("FAIL target speed", "PASS all"), 1, "disagrees"),
        (GOOD, 0, "exit status 0"),
        (GOOD, 2, "exit status 2"),
    ],
)  # fmt: skip
def test_the_judge(output: str, returncode: int, problem: str | None) -> None:
    problems, _ = judge(output, returncode)
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p for p in problems), problems


@pytest.mark.timeout(300)
@pytest.mark.parametrize("script", _params())
def test_quick_run_passes_every_check(script: Path, tmp_path: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("VIBESYS_JOURNAL", "VIBESYS_FAILPOINTS")
    }
    # This checkout's vibesys, whether or not it is installed.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, str(script), "--quick", "--dir", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    problems, checks = judge(done.stdout, done.returncode)
    assert problems == [], f"{problems}\n{done.stdout}\n{done.stderr}"
    assert checks == EXPECTED_CHECKS[script.stem], done.stdout
    # Scratch files went to --dir and were cleaned up there.
    assert list(tmp_path.iterdir()) == []
