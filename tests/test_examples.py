"""Every script in examples/ runs standalone in an empty directory and exits 0."""

from __future__ import annotations

import json
import os
import re
import shutil
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
DIRECTORIES = ["agent_loop", "model_serving"]


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
    assert "agent | profile: no profiler offered in this session" in done.stdout


def run_example(cwd: Path, script: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`script` run with this checkout's vibesys, whether or not it is installed."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("VIBESYS_JOURNAL", "VIBESYS_FAILPOINTS")
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, str(script), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_model_serving_on_this_host(tmp_path: Path) -> None:
    """Without a profile the serving rounds run on this host: each benchmark's metrics come
    home, the round with 4-bit weights is rejected (exit 3), the others pass (on SkyPilot:
    tests/slurm/test_skypilot_live.py)."""
    done = run_example(tmp_path, ROOT / "examples" / "model_serving" / "run.py", "--seconds", "0.5")
    out = done.stdout
    assert done.returncode == 0, f"{out}\n{done.stderr}"
    assert "Traceback" not in done.stderr
    for line in [
        "site: this host (--local): no --profile given",
        "session up: backend local",
        "round 1: ok (COMPLETED, exit 0)",
        "round 2 ! rejected: answers off by up to 0.3550 (tolerance 0.05) at precision q4",
        "round 2: rejected (APPLICATION_FAILED, exit 3)",
        "round 3: ok (COMPLETED, exit 0)",
        "session closed: exit status 0",
        "every round as expected: True",
    ]:
        assert line in out, f"run.py did not print {line!r}:\n{out}"
    rounds = json.loads((tmp_path / "serving" / "rounds.json").read_text())
    for r in rounds:
        home = Path(r["result"]["results_dir"]) / "artifacts" / "results" / "metrics.json"
        assert json.loads(home.read_text()) == r["metrics"]
        assert r["metrics"]["settings"] == r["settings"]
        assert r["metrics"]["requests"] > 0 and r["metrics"]["p50_ms"] <= r["metrics"]["p99_ms"]
    assert not (tmp_path / "serving" / "candidate" / "results").exists()
    assert (tmp_path / ".vibesys" / "journal.db").is_file()


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs_in_an_empty_directory(script: Path, tmp_path: Path) -> None:
    done = run_example(tmp_path, script)
    assert done.returncode == 0, (
        f"{script.name} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    assert "Traceback" not in done.stderr
    for line in EXPECTED[script.name]:
        assert line in done.stdout, f"{script.name} did not print {line!r}:\n{done.stdout}"
    # The journal went where the defaults say: the current directory.
    assert (tmp_path / ".vibesys" / "journal.db").is_file()


#: A stand-in for `docker`: `info` answers, `run` checks what the recipe mounts and passes
#: (each volume's source exists; the results and the helpers read-only; never a token file),
#: logs it, then runs the container's command on this host with only the --env-file's
#: variables, in -w. It stands for the wiring, not the isolation (agent_loop tests that).
FAKE_DOCKER = """#!{python}
import json, os, subprocess, sys
args = sys.argv[1:]
if args[:1] == ["info"]:
    sys.exit(0)
assert args[0] == "run", args
args, seen = args[1:], {{"volumes": [], "flags": []}}
while args[0].startswith("-"):
    flag = args.pop(0)
    if flag in ("--rm",):
        seen["flags"].append(flag)
    elif flag in ("--user", "--network", "-v", "--env-file", "-w"):
        value = args.pop(0)
        if flag == "-v":
            seen["volumes"].append(value)
        else:
            seen[flag] = value
    else:
        sys.exit(f"fake docker: unknown option {{flag}}")
image, command = args[0], args[1:]
with open(os.environ["FAKE_DOCKER_LOG"], "w") as log:
    json.dump(seen | {{"image": image, "command": command}}, log)
env = dict(line.split("=", 1) for line in open(seen["--env-file"]).read().splitlines())
env["PATH"] = os.environ["PATH"]
sys.exit(subprocess.run(command, cwd=seen["-w"], env=env).returncode)
"""


def test_docker_recipe_skips_without_an_engine(tmp_path: Path) -> None:
    # No docker or podman on PATH: it says so, starts nothing, exits 0.
    done = subprocess.run(
        ["bash", str(ROOT / "examples" / "docker_recipe.sh")],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "skipped: no docker or podman engine answers here" in done.stdout
    assert list(tmp_path.iterdir()) == []


def test_docker_recipe_wires_the_container(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(FAKE_DOCKER.format(python=sys.executable))
    docker.chmod(0o755)
    log = tmp_path / "docker.json"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIBESYS_JOURNAL", "VIBESYS_FAILPOINTS", "VIBESYS_SLURM_CONFIG")
    }
    env |= {
        "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
        "VIBESYS": f"{sys.executable} -m vibesys",
        "FAKE_DOCKER_LOG": str(log),
    }
    done = subprocess.run(
        ["bash", str(ROOT / "examples" / "docker_recipe.sh")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    work = re.search(r"stay in (\S+)$", done.stdout, re.M)
    if work is not None:
        shutil.rmtree(work.group(1), ignore_errors=True)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "site: this host (--local)" in done.stdout
    assert "accuracy 0.93" in done.stdout
    assert '"status": "COMPLETED"' in done.stdout
    assert "vibesys-eval in the container exited 0" in done.stdout
    seen = json.loads(log.read_text())
    assert seen["--network"] == "none" and seen["--user"] == f"{os.getuid()}:{os.getgid()}"
    read_only = [v for v in seen["volumes"] if v.endswith(":ro")]
    assert any(v.endswith("/results:ro") for v in read_only), seen
    assert any("client.py:" in v for v in read_only), seen
    assert not any("token" in v for v in seen["volumes"]), seen
    assert seen["image"] == "python:3.11-slim"
