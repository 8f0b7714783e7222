"""`vibesys check` against the real local cluster: all green over the local transport and over
SSH (127.0.0.1:2222), and each failure a person must fix names its fix: a frozen sshd and a
frozen slurmctld (SIGSTOP, reported within the check's time limit, then woken), a wrong host
key, an unwritable root, a root the compute node does not see at the same path. And a
SkyPilot profile whose login node is the real sshd."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import paramiko  # type: ignore[import-untyped]
import pytest

from tests.helpers.skyfake import make_fake_sky
from tests.helpers.slurm import cli, write_slurm_toml
from tests.slurm.test_ssh_remote_slurm import our_sshd
from tests.slurm.test_stalls_slurm import daemon_pid, frozen
from vibesys.sitecheck import (
    CheckOptions,
    CheckReport,
    load_slurm_site,
    run_site_checks,
)

pytestmark = pytest.mark.slurm

#: The limit of each command in the stall tests: a frozen daemon must cost about this, once.
QUICK = CheckOptions(timeout_seconds=3.0, job_wait_seconds=30.0, reply_grace_seconds=1.0)


def ssh_toml(tmp_path: Path, cluster: dict[str, str], root: Path, **changes: object) -> Path:
    ssh_dir = Path(cluster["VIBESYS_SLURM_DIR"]) / "ssh"
    values: dict[str, object] = {
        "host": "127.0.0.1",
        "port": 2222,
        "user": "root",
        "identity_file": str(ssh_dir / "id_ed25519"),
        "known_hosts": str(ssh_dir / "known_hosts"),
        **changes,
    }
    path = tmp_path / f"ssh-{len(list(tmp_path.glob('ssh-*.toml')))}.toml"
    path.write_text(
        f'[slurm]\nname = "over-ssh"\nremote_workspace_root = {json.dumps(str(root))}\n\n'
        '[slurm.transport]\nkind = "ssh"\n'
        + "".join(f"{key} = {json.dumps(value)}\n" for key, value in values.items())
    )
    return path


def rows(report: CheckReport) -> dict[str, tuple[str, str, str]]:
    return {row.name: (str(row.status), row.detail, row.fix) for row in report.rows}


def test_the_local_cluster_is_all_green_over_both_transports(
    tmp_path: Path, slurm_cluster: dict[str, str]
) -> None:
    root = tmp_path / "remote"
    local = write_slurm_toml(tmp_path / "slurm.toml", root)
    over_ssh = ssh_toml(tmp_path, slurm_cluster, root)
    # The local cluster tracks processes by parentage (no cgroups in its container): the one
    # warning, and it names what the cluster runs.
    config_text = subprocess.run(
        ["scontrol", "show", "config"], capture_output=True, text=True, check=True
    ).stdout
    tracking = re.search(r"^ProctrackType\s*=\s*(\S+)", config_text, re.MULTILINE)
    assert tracking is not None, config_text
    warned = set() if tracking[1] == "proctrack/cgroup" else {"proctrack"}
    for config, skipped in ((local, set()), (over_ssh, {"bwrap"})):
        done = cli("check", "--slurm-config", str(config), "--json", cwd=tmp_path, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        shown = json.loads(done.stdout)
        statuses = {row["name"]: row["status"] for row in shown["rows"]}
        assert {n for n, status in statuses.items() if status != "ok"} == skipped | warned, shown
        assert shown["overall"] == ("warn" if warned else "ok")
        proctrack = next(row for row in shown["rows"] if row["name"] == "proctrack")
        assert proctrack["detail"].startswith(f"ProctrackType={tracking[1]}"), proctrack
        node = next(row["detail"] for row in shown["rows"] if row["name"] == "compute-node")
        job = re.match(r"job (\d+) on node1 read the check's file", node)
        assert job is not None, node
        # Nothing is left behind: the job ended, the check's directory is gone.
        state = subprocess.run(
            ["squeue", "-h", "--states=all", "-j", job[1], "-o", "%T"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        assert state in ("", "COMPLETED", "COMPLETING"), state
        assert list(root.iterdir()) == []
    assert "bwrap" in statuses and "certificate" in statuses


def test_a_frozen_or_stopped_sshd_fails_in_bounded_time_naming_sshd(
    tmp_path: Path, slurm_cluster: dict[str, str]
) -> None:
    config = ssh_toml(tmp_path, slurm_cluster, tmp_path / "remote")
    started = time.monotonic()
    with frozen(our_sshd(slurm_cluster)):
        report = run_site_checks(load_slurm_site(config), QUICK)
    took = time.monotonic() - started
    status, detail, fix = rows(report)["transport"]
    assert status == "fail" and "gave up after" in detail, detail
    assert fix.startswith("check that sshd on 127.0.0.1:2222 runs, answers and is reachable")
    assert took < 3.0 + 5, took
    assert [row.status for row in report.rows[2:]] == ["skipped"] * (len(report.rows) - 2)
    # No sshd at all: the port refuses at once.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    stopped = ssh_toml(tmp_path, slurm_cluster, tmp_path / "remote", port=free)
    status, detail, fix = rows(run_site_checks(load_slurm_site(stopped), QUICK))["transport"]
    assert status == "fail" and f"127.0.0.1:{free}" in fix, detail


@pytest.fixture
def unwritable(tmp_path: Path) -> Iterator[Path]:
    """A directory even root cannot write to (immutable), or a path under a plain file where
    the file system has no such attribute."""
    locked = tmp_path / "locked"
    locked.mkdir()
    if subprocess.run(["chattr", "+i", str(locked)], capture_output=True).returncode == 0:
        try:
            yield locked
        finally:
            subprocess.run(["chattr", "-i", str(locked)], check=True)
        return
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    yield blocker / "root"


def test_a_wrong_host_key_and_an_unwritable_root_name_their_fix(
    tmp_path: Path, slurm_cluster: dict[str, str], unwritable: Path
) -> None:
    impostor = paramiko.Ed25519Key.generate() if hasattr(paramiko.Ed25519Key, "generate") else None
    other = impostor or paramiko.RSAKey.generate(2048)
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:2222 {other.get_name()} {other.get_base64()}\n")
    wrong = ssh_toml(tmp_path, slurm_cluster, tmp_path / "remote", known_hosts=str(known))
    status, detail, fix = rows(run_site_checks(load_slurm_site(wrong), QUICK))["transport"]
    assert status == "fail" and "the host key of 127.0.0.1 changed" in detail, detail
    assert fix == (
        "do not connect until the new key is verified out of band; then replace the old "
        "entry for 127.0.0.1 in known_hosts"
    )
    locked = ssh_toml(tmp_path, slurm_cluster, unwritable)
    found = rows(run_site_checks(load_slurm_site(locked), QUICK))
    status, detail, fix = found["workspace-root"]
    assert status == "fail" and detail.startswith(f"{unwritable} is not writable: "), detail
    assert fix == (
        f"make {unwritable} a directory the site's account can write, on the file system the "
        f"compute nodes share, or set remote_workspace_root in {locked}"
    )
    assert found["compute-node"][:2] == ("skipped", "needs workspace-root, which failed")
    assert found["squeue"][0] == found["sacct"][0] == "ok"


def test_a_frozen_slurmctld_fails_squeue_in_bounded_time(
    tmp_path: Path, slurm_cluster: dict[str, str]
) -> None:
    config = write_slurm_toml(tmp_path / "slurm.toml", tmp_path / "remote")
    started = time.monotonic()
    with frozen(daemon_pid(slurm_cluster, "slurmctld")):
        report = run_site_checks(load_slurm_site(config), QUICK)
    took = time.monotonic() - started
    found = rows(report)
    status, detail, fix = found["squeue"]
    assert (status, detail.split(": ")[-1]) == ("fail", "no answer within 3 s"), detail
    assert fix.startswith("slurmctld does not answer: check `scontrol ping`")
    for name in ("sbatch", "scancel", "partitions", "rpc-limits"):
        assert found[name][:2] == ("skipped", "needs squeue, which failed"), name
    assert found["compute-node"][0] == "skipped"
    assert found["sacct"][0] == found["workspace-root"][0] == "ok"
    assert took < 2 * 3.0 + 5, took  # one frozen command, not one per check


def test_a_root_the_compute_node_does_not_see_fails_the_compute_node_check(
    tmp_path: Path, slurm_cluster: dict[str, str]
) -> None:
    """The submit side sees its own directory at the root's path (a tmpfs in a mount namespace
    of its own), the node the real one: the job cannot read the check's file or answer."""
    root = tmp_path / "remote"
    root.mkdir()
    holder = subprocess.Popen(
        [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            f"mount -t tmpfs tmpfs {root} && echo up && exec sleep 120",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "up\n"
        config = write_slurm_toml(tmp_path / "slurm.toml", root)
        enter = ["nsenter", "-t", str(holder.pid), "-m", "bash", "-c"]
        text = config.read_text().replace(
            'kind = "local"\n', f'kind = "local"\nshell_command = {json.dumps(enter)}\n'
        )
        config.write_text(text)
        found = rows(run_site_checks(load_slurm_site(config), QUICK))
    finally:
        holder.kill()
        holder.communicate()
    assert found["workspace-root"][0] == "ok"
    status, detail, fix = found["compute-node"]
    assert status == "fail" and "the compute nodes do not see" in detail, detail
    assert fix == (
        f"share {root} with the compute nodes at the same path, or set remote_workspace_root "
        f"in {config} to a directory they share"
    )
    job = re.match(r"job (\d+) ended \(FAILED\) on node1 without a reply", detail)
    assert job is not None, detail


def test_a_job_that_cannot_start_in_time_is_cancelled_and_only_warns(
    tmp_path: Path, slurm_cluster: dict[str, str]
) -> None:
    """The check's job stays queued (held): after --job-wait it is cancelled, and the row says
    the root's visibility is not proven, without failing the site."""
    config = write_slurm_toml(tmp_path / "slurm.toml", tmp_path / "remote")
    text = config.read_text().replace("[slurm]\n", '[slurm]\nsbatch_arguments = ["--hold"]\n', 1)
    config.write_text(text)
    options = CheckOptions(timeout_seconds=5.0, job_wait_seconds=2.0)
    report = run_site_checks(load_slurm_site(config), options)
    status, detail, fix = rows(report)["compute-node"]
    job = re.match(
        r"job (\d+) was still queued after 2 s \(PENDING, JobHeldUser\) and was cancelled", detail
    )
    assert status == "warn" and job is not None, detail
    assert fix.startswith("run vibesys check again when the partition has room")
    assert rows(report)["bwrap"][:2] == (
        "skipped",
        "the check's job did not report (see compute-node)",
    )
    assert report.exit_status == 0 and report.overall == "warn"
    state = subprocess.run(
        ["squeue", "-h", "--states=all", "-j", job[1], "-o", "%T"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    assert state in ("", "CANCELLED"), state
    assert list((tmp_path / "remote").iterdir()) == []


def test_a_skypilot_profile_over_the_real_login_node(
    tmp_path: Path, slurm_cluster: dict[str, str]
) -> None:
    fake = make_fake_sky(tmp_path)
    ssh_dir = Path(slurm_cluster["VIBESYS_SLURM_DIR"]) / "ssh"
    home = tmp_path / "sky-home"
    (home / ".slurm").mkdir(parents=True)
    (home / ".slurm" / "config").write_text(
        "Host localslurm\n  HostName 127.0.0.1\n  Port 2222\n  User root\n"
        f"  IdentityFile {ssh_dir / 'id_ed25519'}\n  UserKnownHostsFile {ssh_dir / 'known_hosts'}\n"
    )
    env = {**fake.env(), "VIBESYS_SKY_HOME": str(home), "VIBESYS_SKY_LOGIN": "ssh"}
    config = fake.clusters_config(remote_artifact_root=str(tmp_path / "runs"))
    done = cli("check", "--profile", "test", "--profiles", str(config), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.endswith("overall: ok (5 ok)\n"), done.stdout
    assert "  ok       login-node     Host localslurm of " in done.stdout
    assert "ssh root@127.0.0.1:2222: key " in done.stdout
    assert f"  ok       artifact-root  {tmp_path / 'runs'} is writable by root" in done.stdout
    limits = "(sinfo: main MaxTime 30 min (default), priority MaxTime 120 min, short MaxTime 5 min)"
    assert "  ok       partitions     allocation_time 00:20:00 fits a partition" in done.stdout
    # The real login node's sinfo refuses what no partition allows, naming the key to change.
    config = fake.clusters_config(
        remote_artifact_root=str(tmp_path / "runs"), allocation_time="99-00:00:00"
    )
    done = cli("check", "--profile", "test", "--profiles", str(config), cwd=tmp_path, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "  fail     partitions     allocation_time 99-00:00:00 of [profiles.test] exceeds the "
        "MaxTime of every partition it may use (main MaxTime 30 min, priority MaxTime 120 min, "
        f"short MaxTime 5 min) {limits}"
    ) in done.stdout, done.stdout
    assert f"fix: lower allocation_time of [profiles.test] in {config}" in done.stdout
