"""Every script in examples/ runs standalone in an empty directory and exits 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.example_checks import check_agent_loop, run_agent_loop

ROOT = Path(__file__).resolve().parent.parent
# slurm_*.py need the local cluster and run in tests/slurm/test_examples_slurm.py; _*.py are
# modules the examples import, not examples. A directory is one example of several files, run
# by its own test below (and on the cluster in tests/slurm/test_examples_slurm.py).
EXAMPLES = sorted(
    p for p in (ROOT / "examples").glob("*.py") if not p.name.startswith(("slurm_", "_"))
)

#: Lines each example must print; every example found must be listed here.
EXPECTED: dict[str, list[str]] = {
    "local_run.py": [
        "accuracy 0.93",
        "state DONE",
        "outcome COMPLETED",
        "exit code 0",
        "  2  SUBMITTING -> SUBMITTING  SubmitDispatched",
        "  5  COLLECTING -> DONE  Collected",
        "journal verify: ok",
    ],
    "client_submit.py": [
        "same key, same invocation: True",
        "COMPLETED exit 0: seed 0 score 0.0",
        "APPLICATION_FAILED exit 1: seed 1 score 0.1",
        "APPLICATION_FAILED exit 2: seed 2 score 0.2",
    ],
    "fake_backend_retry.py": [
        "state DONE outcome COMPLETED exit 0",
        "attempts 2, retries 1",
        "RUNNING -> RETRYING  InfraFailed  failure_class=NODE_FAILED",
        "RETRYING -> SUBMITTING  SubmitIntended  attempt=2",
        "journal verify: ok",
    ],
    "session_local.py": [
        "backend local",
        "mount eval writable",
        "mount results read-only",
        "notes start with '# Runtime notes'",
        "accuracy 0.93",
        "status COMPLETED, vibesys-eval exit 0",
        "closed: exit status 0, 0 sockets left",
    ],
}


#: The examples that are directories, each with its test here.
DIRECTORIES = ["agent_loop"]


def test_every_example_is_checked() -> None:
    assert sorted(p.name for p in EXAMPLES) == sorted(EXPECTED)
    found = (p.name for p in (ROOT / "examples").iterdir() if p.is_dir() and p.name[0] != "_")
    assert sorted(n for n in found if n != "__pycache__") == DIRECTORIES


def test_agent_loop_on_this_host(tmp_path: Path) -> None:
    """Without a slurm.toml the agent loop evaluates on this host, and says so."""
    done = run_agent_loop(tmp_path)
    assert "site: this host (--local): no slurm.toml given" in done.stdout
    check_agent_loop(done, tmp_path)
    assert "backend local" in done.stdout


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs_in_an_empty_directory(script: Path, tmp_path: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("VIBESYS_JOURNAL", "VIBESYS_FAILPOINTS")
    }
    # This checkout's vibesys, whether or not it is installed.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (
        f"{script.name} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    assert "Traceback" not in done.stderr
    for line in EXPECTED[script.name]:
        assert line in done.stdout, f"{script.name} did not print {line!r}:\n{done.stdout}"
    # The journal went where the defaults say: the current directory.
    assert (tmp_path / ".vibesys" / "journal.db").is_file()
