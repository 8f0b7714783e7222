"""The Slurm examples run against the local cluster, standalone, with the config from argv,
from $VIBESYS_SLURM_CONFIG, or (neither given) one they write for the local cluster; and the
agent loop (examples/agent_loop) evaluates on the cluster given its slurm.toml."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.example_checks import check_agent_loop, run_agent_loop
from tests.helpers.slurm import ROOT, sacct_states, slurm

pytestmark = pytest.mark.slurm

EXAMPLES = ROOT / "examples"
#: The profiler the operator offers the agent loop: py-spy, from its wheel (beside the
#: interpreter), in a directory the site lets GPU jobs read.
PY_SPY = """read_only_paths = [{tools}]

[vibesys.agent_gpu.profilers.py-spy]
command = [{spy}, "record", "--format", "speedscope", "-r", "500", "-o", "{{capture}}.json", "--"]
captures = ["{{capture}}.json"]
"""

#: Lines each example must print (besides the Slurm job line checked below).
EXPECTED = {
    "slurm_sbatch.py": ["accuracy 0.93 (job ", "state DONE", "outcome COMPLETED", "exit code 0"],
    "slurm_srun.py": ["gpu ", " in main)", "state DONE", "outcome COMPLETED", "exit code 0"],
}
COMMON = ["PREPARED -> SUBMITTING  SubmitIntended", "COLLECTING -> DONE  Collected", "verify: ok"]


def run_example(script: str, cwd: Path, args: list[str], env: dict[str, str]) -> str:
    unset = ("VIBESYS_JOURNAL", "VIBESYS_FAILPOINTS", "VIBESYS_SLURM_CONFIG")
    base = {k: v for k, v in os.environ.items() if k not in unset}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        cwd=cwd,
        env=base | env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr
    for line in EXPECTED[script] + COMMON:
        assert line in done.stdout, f"{script} did not print {line!r}:\n{done.stdout}"
    assert "gpu none" not in done.stdout, "the srun example asks for one GPU"
    assert (cwd / ".vibesys" / "journal.db").is_file()
    return done.stdout


def slurm_job_name(stdout: str) -> str:
    """The stable job name in the example's `attempt 1: Slurm job ID (NAME)` line."""
    line = next(x for x in stdout.splitlines() if x.startswith("attempt 1: Slurm job "))
    return line.rsplit("(", 1)[1].rstrip(")")


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_example_with_config_in_argv(tmp_path: Path, slurm_toml: Path, script: str) -> None:
    stdout = run_example(script, tmp_path, [str(slurm_toml)], {})
    assert sacct_states(slurm_job_name(stdout)) == ["COMPLETED"]
    assert (tmp_path / "remote").is_dir(), "the job's files go under remote_workspace_root"


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_example_with_config_in_env(tmp_path: Path, slurm_toml: Path, script: str) -> None:
    run_example(script, tmp_path, [], {"VIBESYS_SLURM_CONFIG": str(slurm_toml)})
    assert (tmp_path / "remote").is_dir()


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_example_in_an_empty_directory(tmp_path: Path, script: str) -> None:
    run_example(script, tmp_path, [], {})
    assert (tmp_path / ".vibesys" / "slurm.toml").is_file()
    assert (tmp_path / ".vibesys" / "remote").is_dir()


def test_agent_loop_on_the_cluster(tmp_path: Path, slurm_toml: Path) -> None:
    """examples/agent_loop: a sandboxed agent evaluates twice through a Session on the cluster,
    then profiles its better candidate under the site's py-spy and reads the capture back; the
    rounds were Slurm jobs that completed, and none is left in the queue."""
    beside = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    found = shutil.which("py-spy", path=beside)
    assert found, "py-spy is a dev dependency (pip install -e '.[dev]')"
    (tmp_path / "tools").mkdir()
    spy = str(shutil.copy(found, tmp_path / "tools" / "py-spy"))
    with slurm_toml.open("a") as site:  # its last table is [vibesys.agent_gpu]
        site.write(PY_SPY.format(tools=json.dumps(str(tmp_path / "tools")), spy=json.dumps(spy)))
    done = run_agent_loop(tmp_path, str(slurm_toml))
    assert f"site: the Slurm cluster of {slurm_toml}" in done.stdout
    jobs = check_agent_loop(done, tmp_path)
    assert "backend slurm" in done.stdout
    assert "agent |   profile exit 0: COMPLETED" in done.stdout
    assert "agent |   read vibesys-profile.json: " in done.stdout
    assert "agent |   most samples in: " in done.stdout
    assert len(jobs) == 2, done.stdout  # the two rounds' (the profile's is not echoed)
    states = slurm("squeue", "-h", "--states=all", "-j", ",".join(jobs), "-o", "%T").split()
    assert states == ["COMPLETED"] * 2, states
