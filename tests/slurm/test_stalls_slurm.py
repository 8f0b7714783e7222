"""Exactly once under stalls, on the real cluster: a frozen slurmctld during sbatch, a stalled
srun, an sshd session or the shared SSH server stopped in the middle of a submission (a
submission accepted after its fence is the adapter contract's: test_contract_slurm.py). And the
failures a person must fix (a changed host key, a candidate deleted before reconcile) end at
once, with the fix, without stopping reconcile."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import paramiko  # type: ignore[import-untyped]
import pytest

from tests.helpers.hang_guard import wait_until
from tests.helpers.paths import ROOT
from tests.helpers.slurm import (
    cli,
    daemon_pid,
    fast_toml,
    frozen,
    history_text,
    listed,
    run_args,
    sacct_rows,
    settled_sacct,
    show,
)
from vibesys.adapters.transports.ssh import SshTransport
from vibesys.config.load import load_slurm_config

pytestmark = pytest.mark.slurm

SBATCH = shutil.which("sbatch") or "/usr/bin/sbatch"
SRUN = shutil.which("srun") or "/usr/bin/srun"


def start_run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    full.pop("VIBESYS_FAILPOINTS", None)
    return subprocess.Popen(
        [sys.executable, "-m", "vibesys", *args],
        cwd=cwd,
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_event(cwd: Path, event: str, timeout: float = 60) -> dict[str, Any]:

    def recorded() -> dict[str, Any] | None:
        for found in listed(cwd):
            inv = show(cwd, str(found["id"]))
            if any(row["event"] == event for row in inv["history"]):
                return inv
        return None

    inv = wait_until(recorded, timeout, f"{event} recorded in {cwd}", interval=0.3)
    assert inv is not None
    return inv


def shim(directory: Path, name: str, body: str) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)
    return directory


def attempts_that_ran(counter: Path) -> list[str]:
    return counter.read_text().splitlines() if counter.exists() else []


def test_a_frozen_slurmctld_during_sbatch_runs_the_command_once(
    tmp_path: Path, slurm_cluster: dict[str, str]
) -> None:
    """Issue: with slurmctld stopped while sbatch submitted, the attempt was called absent,
    attempt 2 was submitted, and the controller then accepted the first request too."""
    config = fast_toml(tmp_path)
    counter = tmp_path / "counter"
    script = f"echo $SLURM_JOB_NAME >> {counter}"
    controller = daemon_pid(slurm_cluster, "slurmctld")
    with frozen(controller):
        run = start_run(
            tmp_path, *run_args("sbatch", config, "--retry-delay", "0"), "sh", "-c", script
        )
        wait_for_event(tmp_path, "OutcomeUnknown", timeout=60)
        time.sleep(6)  # lookups fail while the controller is frozen: nothing is concluded
    _out, err = run.communicate(timeout=240)
    assert run.returncode == 0, err
    inv = show(tmp_path, str(listed(tmp_path)[0]["id"]))
    assert inv["outcome"] == "COMPLETED", history_text(inv)
    names = [a["job_name"] for a in inv["attempts"]]
    for name in names:
        settled_sacct(name) if sacct_rows(name) else None
    assert len(attempts_that_ran(counter)) == 1, attempts_that_ran(counter)


def test_a_stalled_srun_runs_the_command_once(tmp_path: Path) -> None:
    """srun stopped before it asked for an allocation: the attempt is fenced and retried; when
    the old srun wakes up, its job finds the fence and runs nothing."""
    shims = shim(
        tmp_path / "shims",
        "srun",
        f'case "$*" in *--job-name=*-1\\ *) kill -STOP $$ ;; esac\nexec {SRUN} "$@"\n',
    )
    config = fast_toml(tmp_path)
    counter = tmp_path / "counter"
    env = {"PATH": f"{shims}:{os.environ['PATH']}"}
    try:
        done = cli(
            *run_args("srun", config, "--retry-delay", "0"),
            "sh",
            "-c",
            f"echo $SLURM_JOB_NAME >> {counter}",
            cwd=tmp_path,
            env=env,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr
    finally:
        stopped = [p for p in stopped_processes() if str(shims) in cmdline(p)]
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
    inv = show(tmp_path, str(listed(tmp_path)[0]["id"]))
    assert len(inv["attempts"]) == 2 and "kind=fence" in str(inv["attempts"][0]["claim"])
    time.sleep(3)  # the woken srun's job, if it got one, refuses
    assert attempts_that_ran(counter) == [inv["attempts"][1]["job_name"]]


def all_pids() -> list[int]:
    return [int(entry.name) for entry in os.scandir("/proc") if entry.name.isdigit()]


def stopped_processes() -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry.name}/stat").read_text()
                if stat[stat.rindex(")") + 2] == "T":
                    found.append(int(entry.name))
    return found


def cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return ""


def ssh_toml(tmp_path: Path, cluster: dict[str, str], *lines: str) -> Path:
    ssh_dir = Path(cluster["VIBESYS_SLURM_DIR"]) / "ssh"
    path = tmp_path / "ssh.toml"
    path.write_text(
        "[slurm]\n"
        'name = "over-ssh"\n'
        f"remote_workspace_root = {json.dumps(str(tmp_path / 'remote'))}\n"
        "poll_initial_seconds = 0.2\npoll_max_seconds = 1\ncommand_timeout_seconds = 5\n\n"
        "[slurm.transport]\n"
        'kind = "ssh"\nhost = "127.0.0.1"\nport = 2222\nuser = "root"\n'
        f"identity_file = {json.dumps(str(ssh_dir / 'id_ed25519'))}\n"
        "reconnect_attempts = 8\nreconnect_backoff_seconds = 0.5\n"
        + "".join(f"{x}\n" for x in lines)
    )
    return path


def shimmed_ssh_toml(
    tmp_path: Path, cluster: dict[str, str], sbatch_first: str, *lines: str
) -> Path:
    """ssh.toml whose remote commands find an sbatch that runs `sbatch_first` (bash) first."""
    known = Path(cluster["VIBESYS_SLURM_DIR"]) / "ssh" / "known_hosts"
    shims = shim(tmp_path / "shims", "sbatch", sbatch_first + f'exec {SBATCH} "$@"\n')
    path_value = f"PATH={shims}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    return ssh_toml(
        tmp_path,
        cluster,
        f"known_hosts = {json.dumps(str(known))}",
        f'shell_command = ["env", {json.dumps(path_value)}, "bash", "-c"]',
        *lines,
    )


def counted_sbatch_run(tmp_path: Path, config: Path) -> tuple[subprocess.Popen[str], Path]:
    """`vibesys run --adapter sbatch` of a command that notes each attempt that ran it."""
    counter = tmp_path / "counter"
    run = start_run(
        tmp_path,
        *run_args("sbatch", config, "--time", "5", "--retry-delay", "0"),
        "sh",
        "-c",
        f"echo $SLURM_JOB_NAME >> {counter}",
    )
    return run, counter


def test_an_sshd_session_stopped_mid_submit_runs_the_command_once(
    tmp_path: Path, slurm_cluster: dict[str, str]
) -> None:
    """The sshd process serving the submit is stopped while sbatch runs behind it: the
    answer never comes back, the lookups time out on that connection, and once it wakes the
    job is found by name. It never runs twice."""
    config = shimmed_ssh_toml(
        tmp_path,
        slurm_cluster,
        'if grep -q -- "--job-name=.*-1$" "${@: -1}"; then\n'
        "  p=$$\n"
        '  while [ "$p" -gt 1 ] && [ "$(cat /proc/$p/comm)" != sshd ]; do\n'
        "    p=$(cut -d' ' -f4 /proc/$p/stat)\n"
        "  done\n"
        '  [ "$p" -gt 1 ] && kill -STOP "$p"\n'
        "fi\n",
    )
    run, counter = counted_sbatch_run(tmp_path, config)
    try:
        deadline = time.monotonic() + 60
        while not [p for p in stopped_processes() if cmdline(p).startswith("sshd")]:
            assert time.monotonic() < deadline and run.poll() is None, "no sshd session stopped"
            time.sleep(0.2)
        wait_for_event(tmp_path, "OutcomeUnknown", timeout=60)
        time.sleep(4)
    finally:
        for pid in stopped_processes():
            if cmdline(pid).startswith("sshd"):
                os.kill(pid, signal.SIGCONT)
    _out, err = run.communicate(timeout=240)
    assert run.returncode == 0, err
    inv = show(tmp_path, str(listed(tmp_path)[0]["id"]))
    assert inv["outcome"] == "COMPLETED", history_text(inv)
    assert len(attempts_that_ran(counter)) == 1, attempts_that_ran(counter)


def test_a_shared_ssh_server_stopped_mid_submit_runs_the_command_once(
    tmp_path: Path, slurm_cluster: dict[str, str]
) -> None:
    """The host's shared SSH connection (its server process) is stopped while sbatch runs
    behind it: the answer never comes back, the run passes the silent server over for a
    connection of its own, finds the job by name and completes it. It never runs twice."""
    flag = tmp_path / "stop-the-server"
    server = tmp_path / "server.pid"
    config = shimmed_ssh_toml(
        tmp_path,
        slurm_cluster,
        f'if [ -e {flag} ]; then rm -f {flag}; kill -STOP "$(cat {server})"; fi\n',
        "connect_timeout_seconds = 3",
    )
    share = SshTransport.from_config(load_slurm_config(config).slurm.transport).pool.share
    assert share is not None
    socket_path = share[0]
    # A first run logs in itself and starts the shared server for the next one.
    first = start_run(tmp_path, *run_args("sbatch", config, "--time", "5"), "true")
    _out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    deadline = time.monotonic() + 30
    while not (pids := [p for p in all_pids() if str(socket_path) in cmdline(p)]):
        assert time.monotonic() < deadline, "no shared server started"
        time.sleep(0.2)
    server.write_text(str(pids[0]))
    flag.touch()
    run, counter = counted_sbatch_run(tmp_path, config)
    try:
        deadline = time.monotonic() + 60
        while pids[0] not in stopped_processes():
            assert time.monotonic() < deadline and run.poll() is None, "the server not stopped"
            time.sleep(0.2)
        wait_for_event(tmp_path, "OutcomeUnknown", timeout=60)
    finally:
        os.kill(pids[0], signal.SIGCONT)
    _out, err = run.communicate(timeout=240)
    assert run.returncode == 0, err
    shown = [show(tmp_path, str(found["id"])) for found in listed(tmp_path)]
    (inv,) = [one for one in shown if str(counter) in " ".join(one["command"])]
    assert inv["outcome"] == "COMPLETED", history_text(inv)
    assert len(attempts_that_ran(counter)) == 1, attempts_that_ran(counter)
    os.kill(pids[0], signal.SIGKILL)


def test_a_changed_host_key_ends_at_once_with_the_fix(
    tmp_path: Path, slurm_cluster: dict[str, str]
) -> None:
    impostor = paramiko.Ed25519Key.generate() if hasattr(paramiko.Ed25519Key, "generate") else None
    other = impostor or paramiko.RSAKey.generate(2048)
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:2222 {other.get_name()} {other.get_base64()}\n")
    config = ssh_toml(tmp_path, slurm_cluster, f"known_hosts = {json.dumps(str(known))}")
    done = cli(*run_args("sbatch", config, "--time", "5"), "true", cwd=tmp_path, timeout=120)
    assert done.returncode == 78, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "MISCONFIGURED" in last and "host key" in last and "fix:" in last, last
    inv = show(tmp_path, str(listed(tmp_path)[0]["id"]))
    assert inv["outcome"] == "MISCONFIGURED" and inv["retries"] == 0
    assert len(inv["attempts"]) == 1


def test_a_corrupt_known_hosts_is_one_line(tmp_path: Path, slurm_cluster: dict[str, str]) -> None:
    known = tmp_path / "known_hosts"
    known.write_bytes(b"[127.0.0.1]:2222 ssh-ed25519 !!!not-base64!!!\n\xff\xfe garbage\n")
    config = ssh_toml(tmp_path, slurm_cluster, f"known_hosts = {json.dumps(str(known))}")
    done = cli(*run_args("sbatch", config, "--time", "5"), "true", cwd=tmp_path, timeout=120)
    assert "Traceback" not in done.stderr
    assert done.returncode in (2, 78), done.stderr


def test_a_deleted_candidate_is_misconfigured_and_reconcile_goes_on(
    tmp_path: Path, slurm_toml: Path
) -> None:
    cand = tmp_path / "cand"
    cand.mkdir()
    (cand / "main.py").write_text("print('candidate')\n")
    for extra in (["--candidate", str(cand)], []):
        crashed = cli(
            *run_args("sbatch", slurm_toml, "--time", "5", *extra),
            "true",
            cwd=tmp_path,
            env={"VIBESYS_FAILPOINTS": "after_submit_intent"},
        )
        assert crashed.returncode == 137, crashed.stderr
    shutil.rmtree(cand)
    reconciled = cli("reconcile", "--json", cwd=tmp_path, timeout=120)
    assert "Traceback" not in reconciled.stderr
    rows = {row["invocation"]: row for row in json.loads(reconciled.stdout)["reconciled"]}
    invocations = {str(i["id"]): show(tmp_path, str(i["id"])) for i in listed(tmp_path)}
    with_candidate = [i for i in invocations.values() if i["request"].get("candidate")]
    plain = [i for i in invocations.values() if not i["request"].get("candidate")]
    assert with_candidate[0]["outcome"] == "MISCONFIGURED"
    assert "restore" in json.dumps(with_candidate[0]["history"][-1]["evidence"])
    assert rows[str(plain[0]["id"])]["after"] in ("RUNNING", "COLLECTING", "DONE")


def test_an_argument_list_too_long_is_misconfigured_not_retried(
    tmp_path: Path, slurm_toml: Path
) -> None:
    """Each argument is short enough for vibesys, but the srun command line the transport
    builds is one argument of 200 KB: exec refuses it (E2BIG). Nothing ran, and retrying
    cannot help: MISCONFIGURED at once, with the fix."""
    words = ["x" * 2000] * 100
    done = cli(*run_args("srun", slurm_toml), "echo", *words, cwd=tmp_path, timeout=120)
    assert done.returncode == 78, done.stderr
    assert "Traceback" not in done.stderr
    assert "too long" in done.stderr.strip().splitlines()[-1]
    inv = show(tmp_path, str(listed(tmp_path)[0]["id"]))
    assert inv["outcome"] == "MISCONFIGURED" and len(inv["attempts"]) == 1
