"""The pieces of the Slurm site check that need no cluster: the partitions row from real
`sinfo` output, the check's directory in the workspace root, and the compute-node job's
script run by bash on this host (its reply, and the bwrap row read from it)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from vibesys.adapters.transports import CommandResult, LocalTransport
from vibesys.config.load import parse_slurm_config
from vibesys.config.slurm import LocalTransportConfig
from vibesys.sitecheck import CheckOptions, SlurmSite
from vibesys.sitecheck.access import SiteAccess
from vibesys.sitecheck.rootdir import RootNotWritable, make_check_dir, remove_check_dir
from vibesys.sitecheck.slurm import SlurmChecks, partitions_found
from vibesys.sitecheck.slurm_job import JobProbe, JobSettings, bwrap_found, job_script, parse_reply

#: `sinfo -h -o '%P %l'` on the local cluster.
SINFO = "main* 30:00\npriority 2:00:00\nshort 5:00\n"


def site(agent: str = "", sbatch: str = "") -> str:
    text = (
        '[slurm]\nname = "s"\nremote_workspace_root = "/shared/v"\n'
        f'{sbatch}\n[slurm.transport]\nkind = "local"\n'
    )
    if agent:
        text += f"[vibesys.agent_gpu]\nmax_gpus = 2\n{agent}\n"
    return text


def row(agent: str = "", sbatch: str = "", sinfo: str = SINFO) -> tuple[str, str, str]:
    found = partitions_found(sinfo, parse_slurm_config(site(agent, sbatch)), "slurm.toml")
    return str(found.status), found.detail, found.fix


LISTING = "main 30 min (default), priority 120 min, short 5 min"


def test_partitions_that_fit() -> None:
    agent = 'partitions = ["priority"]\nmax_time_minutes = 120\ndefault_time_minutes = 5'
    assert row(agent) == ("ok", f"sinfo: {LISTING}", "")
    assert row() == ("ok", f"sinfo: {LISTING}", "")


def test_a_partition_that_does_not_exist_fails() -> None:
    agent = 'partitions = ["gpu", "main"]\nmax_time_minutes = 20\ndefault_time_minutes = 5'
    assert row(agent) == (
        "fail",
        f"vibesys.agent_gpu.partitions names 'gpu', not in sinfo (sinfo: {LISTING})",
        "fix the partitions and times in slurm.toml to match the cluster's",
    )
    status, detail, _ = row(sbatch='sbatch_arguments = ["--partition=big,main"]')
    assert (status, detail.split(" (sinfo")[0]) == (
        "fail",
        "sbatch_arguments names partition 'big', which sinfo does not list",
    )


def test_times_against_the_limits() -> None:
    longer = 'partitions = ["main"]\nmax_time_minutes = 60\ndefault_time_minutes = 45'
    status, detail, _ = row(longer)
    assert (status, detail.split(" (sinfo")[0]) == (
        "fail",
        "default_time_minutes 45 fits none of main; max_time_minutes 60 exceeds the MaxTime "
        "of every configured partition (main 30 min (default))",
    )
    some = 'partitions = ["main", "priority"]\nmax_time_minutes = 100\ndefault_time_minutes = 5'
    assert row(some) == (
        "ok",
        f"sinfo: {LISTING}; max_time_minutes 100 exceeds the limit of main 30 min (default): "
        "longer requests use another partition, or are refused",
        "",
    )
    # A ceiling no configured partition allows fails the row: requests up to it would be
    # accepted by the agent's limits and refused at submission.
    none = 'partitions = ["main", "short"]\nmax_time_minutes = 100\ndefault_time_minutes = 5'
    assert row(none) == (
        "fail",
        "max_time_minutes 100 exceeds the MaxTime of every configured partition (main 30 min "
        f"(default), short 5 min) (sinfo: {LISTING})",
        "fix the partitions and times in slurm.toml to match the cluster's",
    )
    assert row(none.replace("100", "30"))[0] == "ok"
    status, detail, _ = row(sbatch='sbatch_arguments = ["--time=45"]')
    assert (status, detail.split(" (sinfo")[0]) == (
        "fail",
        "sbatch_arguments --time=45 exceeds main 30 min (default)",
    )
    assert row(sbatch='sbatch_arguments = ["-ppriority", "-t1:00:00"]')[0] == "ok"
    # Slurm counts a started minute: 30:30 does not fit a MaxTime of 30 minutes.
    assert row(sbatch='sbatch_arguments = ["--time=30:00"]')[0] == "ok"
    assert row(sbatch='sbatch_arguments = ["--time=30:30"]')[1].startswith(
        "sbatch_arguments --time=30:30 exceeds main 30 min (default)"
    )
    assert row(sbatch='sbatch_arguments = ["--time=soon"]')[1].startswith(
        "sbatch_arguments --time=soon is not a Slurm time"
    )


def access() -> SiteAccess:
    return SiteAccess(LocalTransportConfig(kind="local"), 10.0, where="[slurm.transport]")


def test_the_check_directory_is_made_and_removed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    made = make_check_dir(access(), str(root), "n0nce")
    assert made.created_root and Path(made.path).parent == root
    assert Path(made.path, "ping").read_text() == "n0nce"
    again = make_check_dir(access(), str(root), "n0nce")
    assert not again.created_root
    assert remove_check_dir(access(), made.path) and not Path(made.path).exists()
    # Only ever a check directory.
    keep = tmp_path / "keep"
    keep.mkdir()
    assert not remove_check_dir(access(), str(keep)) and keep.exists()


def test_an_unwritable_root_says_why(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(
        RootNotWritable, match=r"/file/root is not writable: mkdir: .*Not a directory"
    ):
        make_check_dir(access(), str(blocker / "root"), "n")


def run_job(settings: JobSettings, node: str = "node7") -> str:
    """The job's script, run by bash here as Slurm would run it on a node."""
    env = {**os.environ, "SLURMD_NODENAME": node}
    subprocess.run(
        ["bash", "-s"], input=job_script(settings), text=True, env=env, check=True, timeout=30
    )
    return Path(settings.check_dir, "pong").read_text()


def probe_of(settings: JobSettings, text: str) -> JobProbe:
    probe = JobProbe(access(), settings, "/root", "share it")
    probe.reply = parse_reply(text)
    return probe


def test_the_job_reads_the_nonce_and_confines_a_command(tmp_path: Path) -> None:
    made = make_check_dir(access(), str(tmp_path / "root"), "cafe01")
    present = tmp_path / "venv"
    present.mkdir()
    settings = JobSettings(
        "vibesys-check-x",
        made.path,
        "cafe01",
        bwrap=True,
        read_only_paths=(str(present), str(tmp_path / "absent")),
    )
    reply = parse_reply(run_job(settings))
    version = LocalTransport().run(["bwrap", "--version"]).stdout.strip()
    assert reply.values == {
        "nonce": "cafe01",
        "node": "node7",
        "bwrap": version,
        "probe_rc": "0",
        "probe": "cafe01",
    }
    assert reply.missing == (str(tmp_path / "absent"),)
    found = bwrap_found(
        probe_of(settings, run_job(settings)),
        enabled=True,
        source="s.toml",
        read_only_paths=settings.read_only_paths,
    )
    assert (str(found.status), found.detail) == (
        "fail",
        f"read_only_paths missing on node7: {tmp_path / 'absent'}",
    )
    assert "vibesys.agent_gpu.read_only_paths in s.toml" in found.fix
    fine = JobSettings("vibesys-check-x", made.path, "cafe01", bwrap=True)
    found = bwrap_found(
        probe_of(fine, run_job(fine)), enabled=True, source="s.toml", read_only_paths=()
    )
    assert (str(found.status), found.detail) == (
        "ok",
        f"{version} on node7 confines a command to the workspace (the node the check's job ran on)",
    )


def test_the_bwrap_row_from_what_a_node_said() -> None:
    settings = JobSettings("n", "/root/.vibesys-check.x", "beef", bwrap=True)

    def said(text: str) -> tuple[str, str]:
        found = bwrap_found(probe_of(settings, text), enabled=True, source="s", read_only_paths=())
        return str(found.status), found.detail

    assert said("nonce=beef\nnode=n1\nbwrap=\n") == ("fail", "bwrap is not on PATH on n1")
    denied = "bwrap: No permissions to create new namespace"
    assert said(f"nonce=beef\nnode=n1\nbwrap=bubblewrap 0.8.0\nprobe_rc=1\nprobe={denied}\n") == (
        "fail",
        f"bubblewrap 0.8.0 on n1 cannot confine a command (exit 1): {denied}",
    )
    off = bwrap_found(probe_of(settings, ""), enabled=False, source="s", read_only_paths=())
    assert (str(off.status), off.fix) == ("skipped", "")
    silent = JobProbe(access(), settings, "/root", "share it")
    assert (
        str(bwrap_found(silent, enabled=True, source="s", read_only_paths=()).status) == "skipped"
    )


def test_a_job_that_cannot_read_the_nonce_says_so(tmp_path: Path) -> None:
    made = make_check_dir(access(), str(tmp_path / "root"), "cafe02")
    Path(made.path, "ping").unlink()  # the node does not see the check's file
    settings = JobSettings("vibesys-check-y", made.path, "cafe02")
    reply = parse_reply(run_job(settings))
    assert reply.values == {"nonce": "", "node": "node7"}
    found = JobProbe(access(), settings, str(tmp_path / "root"), "share it")._answered(reply, 1.0)
    assert (str(found.status), found.fix) == ("fail", "share it")
    assert "wrote back a reply without the check's nonce" in found.detail


class ScriptedSite:
    """The Slurm side as fixed answers per program (a Runner)."""

    def __init__(self, **answers: tuple[int, str, str]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def run(self, argv: Sequence[str], **_: object) -> CommandResult:
        self.calls.append(list(argv))
        code, out, err = self.answers.get(argv[0], (0, "", ""))
        return CommandResult(code, out, err, tuple(argv))

    def stream(self, argv: Sequence[str], sink: object, **_: object) -> CommandResult:
        raise AssertionError("not used")


def slurm_rows(runner: ScriptedSite, text: str = "") -> dict[str, tuple[str, str, str]]:
    config = parse_slurm_config(text or site())
    checks = SlurmChecks(SlurmSite(config, "slurm.toml"), CheckOptions(), runner=runner)
    found = {}
    for check in checks.checks():
        if check.name in ("squeue", "sbatch", "sacct", "rpc-limits"):
            row = check.run()
            found[check.name] = (str(row.status), row.detail, row.fix)
    return found


def test_the_controllers_rpc_limit_as_the_shared_poll_reads_it() -> None:
    config = (
        "Configuration data as of 2026-12-01T10:00:00\n"
        "MinJobAge               = 300 sec\n"
        "SlurmctldParameters     = enable_configless,rl_enable,rl_refill_rate=4,"
        "rl_refill_period=60\n"
    )
    found = slurm_rows(ScriptedSite(scontrol=(0, config, "")))
    assert found["rpc-limits"] == (
        "ok",
        "RPC rate limit: rl_refill_rate=4 per rl_refill_period=60s, rl_bucket_size=30: status "
        "rounds at most every 30 s (rl_refill_rate=4 per rl_refill_period=60s: at most 50% of "
        "it); squeue keeps finished jobs 300 sec (MinJobAge)",
        "",
    )


def test_what_the_slurm_commands_said() -> None:
    runner = ScriptedSite(
        squeue=(127, "", "bash: line 1: squeue: command not found"),
        sbatch=(1, "", "sbatch: error: Batch job submission failed: Invalid account"),
        sacct=(1, "", "sacct: error: Problem talking to the database: Connection refused"),
    )
    found = slurm_rows(runner, site(sbatch='sbatch_arguments = ["--account=lab"]'))
    assert found["squeue"][:2] == ("fail", "squeue: command not found on the Slurm side")
    assert found["sbatch"] == (
        "fail",
        "sbatch --test-only with sbatch_arguments --account=lab refused: sbatch: error: Batch job "
        "submission failed: Invalid account",
        "fix [slurm] sbatch_arguments in slurm.toml (the account, partition or QOS sbatch "
        "refuses); `sacctmgr show assoc user=$USER` lists what you may use",
    )
    status, detail, fix = found["sacct"]
    assert (status, detail) == (
        "fail",
        "sacct exited 1: sacct: error: Problem talking to the database: Connection refused",
    )
    assert fix.startswith("start slurmdbd")
    sbatch = next(call for call in runner.calls if call[0] == "sbatch")
    assert sbatch[:3] == ["sbatch", "--test-only", "--account=lab"]
    assert "--wrap=true" in sbatch and "--output=/dev/null" in sbatch
