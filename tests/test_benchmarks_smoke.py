"""Each benchmark runs in its --quick mode and reports a ratio and a verdict.

No timing is asserted: PASS and FAIL lines are both fine here (the figures of a smoke run on a
busy machine mean nothing); what must hold is that the script runs to its end and reports.
Benchmarks named `bench_slurm*` need the project's local Slurm cluster and are skipped when it
is not up (`scripts/local-slurm up`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = sorted((ROOT / "benchmarks").glob("bench_*.py"))


def _params() -> list[object]:
    return [
        pytest.param(path, id=path.stem, marks=[pytest.mark.slurm] if "slurm" in path.stem else [])
        for path in BENCHMARKS
    ]


def _slurm_is_up() -> bool:
    status = subprocess.run(
        [str(ROOT / "scripts" / "local-slurm"), "status"],
        capture_output=True,
        check=False,
        timeout=60,
    )
    return status.returncode == 0


def test_there_are_benchmarks() -> None:
    assert {p.name for p in BENCHMARKS} >= {
        "bench_commit.py",
        "bench_show.py",
        "bench_startup.py",
        "bench_memory.py",
    }


@pytest.mark.parametrize("script", _params())
def test_quick_run_reports_a_ratio(script: Path, tmp_path: Path) -> None:
    if "slurm" in script.stem and not _slurm_is_up():
        pytest.skip("the local Slurm cluster is not up (scripts/local-slurm up)")
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
        timeout=600,
        check=False,
    )
    output = done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    assert re.search(r"^ratio\b.*\d+\.\d+", output, re.MULTILINE), output
    verdicts = re.findall(r"^(PASS|FAIL) ", output, re.MULTILINE)
    assert verdicts, output
    # Exit status 0 when every target is met, 1 when one is missed; anything else is a crash.
    assert done.returncode == (1 if "FAIL" in verdicts else 0), (done.returncode, done.stderr)
    # Scratch files went to --dir and were cleaned up there.
    assert list(tmp_path.iterdir()) == []
