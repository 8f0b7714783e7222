"""What a run was started with is what it runs with, on the real cluster: slurm.toml is read
once, when the invocation is recorded; edited (a partition removed, a transport that cannot
work) and then deleted while the job runs, it changes nothing: the job is polled, reconciled,
waited for and collected from the recorded rendering. And the deprecated [slurm_gpu] file
sizes a trusted sbatch evaluation as its gates were sized, with one warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.slurm import (
    cli,
    job_output,
    run_args,
    show,
    wait_for_job_id,
    write_slurm_toml,
)

pytestmark = pytest.mark.slurm

BAD_TRANSPORT = '[slurm.transport]\nkind = "ssh"\nhost = "nowhere.invalid"\nport = 1\n'


def test_an_edited_then_deleted_slurm_toml_changes_nothing_for_a_running_job(
    tmp_path: Path,
) -> None:
    config = write_slurm_toml(tmp_path / "slurm.toml", tmp_path / "remote")
    gate = tmp_path / "remote" / "go"
    script = f"echo started; while [ ! -e {gate} ]; do sleep 0.2; done; echo 42 > result.txt"
    started = cli(
        *run_args("sbatch", config, "--detach", "--artifact", "result.txt"),
        "sh",
        "-c",
        script,
        cwd=tmp_path,
    )
    assert started.returncode == 0, started.stderr
    invocation, _, _ = wait_for_job_id(tmp_path)
    recorded = cli("journal", "config", invocation, cwd=tmp_path).stdout

    # The operator edits the file: a partition gone, a transport that cannot work.
    text = config.read_text().replace('["main", "priority"]', '["main"]')
    config.write_text(text.replace('[slurm.transport]\nkind = "local"\n', BAD_TRANSPORT))
    reconciled = cli("reconcile", "--json", cwd=tmp_path)
    assert reconciled.returncode == 0, reconciled.stderr
    shown = json.loads(reconciled.stdout)
    [row] = shown["reconciled"]
    assert (shown["unresolved"], shown["failed"], shown["exit_status"]) == ([], 0, 0), shown
    assert row["after"] == "RUNNING" and "nowhere" not in row["evidence"], row

    # ... then deletes it. The job ends as it would have, collected with its artifact.
    config.unlink()
    gate.touch()
    waited = cli("wait", invocation, cwd=tmp_path)
    assert waited.returncode == 0, waited.stderr
    inv = show(tmp_path, invocation)
    assert job_output(inv) == "started\n"
    assert (inv["state"], inv["outcome"], inv["exit_code"]) == ("DONE", "COMPLETED", 0)
    assert [(a["path"], a["state"]) for a in inv["artifacts"]] == [("result.txt", "acknowledged")]
    assert [r["event"] for r in inv["history"]].count("SiteReplaced") == 0
    assert cli("journal", "config", invocation, cwd=tmp_path).stdout == recorded
    assert cli("reconcile", cwd=tmp_path).stdout == "nothing to reconcile\n"


SLURM_GPU = """[slurm_gpu]
partitions = ["priority", "main"]
max_gpus = 2
max_time_minutes = 60
default_time_minutes = 5
gate_gpus = 2
gate_time_minutes = 7
"""


def test_a_trusted_evaluation_from_a_slurm_gpu_file(tmp_path: Path) -> None:
    """Translated once (one warning), sized as the gates were: --gres=gpu:2, --time=7 and
    both partitions (Slurm picks the one that starts it first), staged under the old stage
    directory in HOME. A key the translation cannot carry over is refused by name."""
    old = tmp_path / "slurm-gpu.toml"
    old.write_text(SLURM_GPU)
    env = {"HOME": str(tmp_path)}
    done = cli(
        *run_args("sbatch", old),
        "sh",
        "-c",
        'echo "gpus=$CUDA_VISIBLE_DEVICES"',
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "gpus=0,1\n"
    assert done.stderr.count("deprecated") == 1 and "warning" in done.stderr
    [inv] = json.loads(cli("journal", "list", "--json", cwd=tmp_path).stdout)["invocations"]
    stage = tmp_path / ".cache" / "vibesys" / "slurm-gpu-stage"
    script = (stage / inv["id"] / "1" / "job.sbatch").read_text()
    for line in ("--gres=gpu:2", "--time=7", "--partition=priority,main"):
        assert f"#SBATCH {line}\n" in script, script
    old.write_text(SLURM_GPU + 'gpu_type = "a100"\n')
    refused = cli(*run_args("sbatch", old), "true", cwd=tmp_path, env=env)
    assert refused.returncode == 2
    assert "slurm_gpu.gpu_type: unknown key, cannot be carried over" in refused.stderr
