"""An SSH certificate that expires during a campaign, against the real sshd (which trusts the
CA `scripts/local-slurm` makes) and the real cluster. The test controls expiry by replacing the
certificate with one whose window has passed, as a site's signer would leave it.

- A job running while the certificate expires is left alone: `reconcile` holds it and names
  the certificate and its renewal, `wait` ends UNRESOLVED (its unreachable timeout spent) with
  the same reason; after the renewal `reconcile` carries it on to DONE.
- A submission with the expired certificate is MISCONFIGURED (exit 78): nothing ran.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.slurm import cli, run_args, show, squeue_jobs, wait_for_job_id
from vibesys.states.exits import EXIT_MISCONFIGURED, EXIT_UNRESOLVED, EXIT_WAITING

pytestmark = pytest.mark.slurm

RENEW = "renew the SSH certificate"


def sign(ca: Path, key: Path, window: str) -> None:
    """(Re)write KEY-cert.pub, a user certificate for root valid for `window` (ssh-keygen -V)."""
    subprocess.run(
        [
            "ssh-keygen",
            "-q",
            "-s",
            str(ca),
            "-I",
            "vibesys",
            "-n",
            "root",
            "-V",
            window,
            f"{key}.pub",
        ],
        check=True,
        timeout=30,
    )


@pytest.fixture
def certified(tmp_path: Path, slurm_cluster: dict[str, str]) -> tuple[Path, Path, Path]:
    """(slurm.toml over SSH with a key that only its certificate admits, the CA, the key)."""
    ssh_dir = Path(slurm_cluster["VIBESYS_SLURM_DIR"]) / "ssh"
    key = tmp_path / "keys" / "id_ed25519"
    key.parent.mkdir()
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=30
    )
    sign(ssh_dir / "user_ca", key, "-1m:+1h")
    config = tmp_path / "ssh.toml"
    config.write_text(
        "[slurm]\n"
        'name = "certified"\n'
        f"remote_workspace_root = {json.dumps(str(tmp_path / 'remote'))}\n"
        "poll_initial_seconds = 0.2\npoll_max_seconds = 1\n\n"
        "[slurm.transport]\n"
        'kind = "ssh"\nhost = "127.0.0.1"\nport = 2222\nuser = "root"\n'
        f"identity_file = {json.dumps(str(key))}\n"
        f"known_hosts = {json.dumps(str(ssh_dir / 'known_hosts'))}\n"
        # Each process logs in itself: a shared connection logged in before the expiry
        # would hide it (the site checks a certificate at login only).
        "persist_seconds = 0\nreconnect_attempts = 3\nreconnect_backoff_seconds = 0.2\n"
    )
    return config, ssh_dir / "user_ca", key


def test_a_certificate_expiring_under_a_running_job_is_named_and_renewed(
    tmp_path: Path, certified: tuple[Path, Path, Path]
) -> None:
    config, ca, key = certified
    go = tmp_path / "go"
    script = f"while [ ! -e {go} ]; do sleep 0.5; done; echo done"
    args = run_args("sbatch", config, "--time", "5", "--detach", "--unreachable-timeout", "4")
    started = cli(*args, "sh", "-c", script, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    inv_id, job_name, job_id = wait_for_job_id(tmp_path)

    sign(ca, key, "-10m:-1m")  # the certificate has expired
    cert = f"{key}-cert.pub"
    reconciled = cli("reconcile", "--json", cwd=tmp_path)
    assert reconciled.returncode == EXIT_WAITING, reconciled.stderr
    [row] = json.loads(reconciled.stdout)["reconciled"]
    assert (row["before"], row["after"]) == ("RUNNING", "RUNNING"), row
    assert row["evidence"].startswith("left as it is: login refused since "), row
    assert f"the SSH certificate {cert} expired at " in row["evidence"]
    assert f"fix: {RENEW} {cert}" in row["evidence"]
    # Queued or running (a busy node may not have started it yet), never cancelled.
    jobs = squeue_jobs(job_name)
    assert jobs in ({job_id: "PENDING"}, {job_id: "RUNNING"}), f"the job must be left alone: {jobs}"

    waited = cli("wait", inv_id, "--json", cwd=tmp_path)
    assert waited.returncode == EXIT_UNRESOLVED, waited.stderr
    result = json.loads(waited.stdout)["result"]
    assert result["status"] == "UNRESOLVED", result
    assert result["reason"].startswith("login refused: "), result["reason"]
    assert f"the SSH certificate {cert} expired at " in result["reason"]
    assert f"{RENEW} {cert}" in result["reason"]
    # Queued or running (a busy node may not have started it yet), never cancelled.
    jobs = squeue_jobs(job_name)
    assert jobs in ({job_id: "PENDING"}, {job_id: "RUNNING"}), f"the job must be left alone: {jobs}"
    unresolved = cli("reconcile", "--json", cwd=tmp_path)
    assert unresolved.returncode == EXIT_UNRESOLVED, unresolved.stderr
    [row] = json.loads(unresolved.stdout)["reconciled"]
    assert (row["before"], row["after"]) == ("UNRESOLVED", "UNRESOLVED"), row
    assert f"fix: {RENEW} {cert}" in row["evidence"], row

    sign(ca, key, "-1m:+1h")  # renewed
    go.touch()
    deadline = time.monotonic() + 90
    while cli("reconcile", cwd=tmp_path).returncode != 0 and time.monotonic() < deadline:
        time.sleep(1)
    inv = show(tmp_path, inv_id)
    assert (inv["state"], inv["outcome"]) == ("DONE", "COMPLETED"), inv
    assert len(inv["attempts"]) == 1, "a refused login must never resubmit"


def test_a_submission_with_an_expired_certificate_is_misconfigured_and_runs_nothing(
    tmp_path: Path, certified: tuple[Path, Path, Path]
) -> None:
    config, ca, key = certified
    sign(ca, key, "-10m:-1m")
    done = cli(*run_args("sbatch", config, "--time", "5", "--json"), "true", cwd=tmp_path)
    assert done.returncode == EXIT_MISCONFIGURED, done.stderr
    result = json.loads(done.stdout)["result"]
    assert result["status"] == "MISCONFIGURED", result
    assert f"the SSH certificate {key}-cert.pub expired at " in result["reason"]
    inv = show(tmp_path, result["invocation_id"])
    [attempt] = inv["attempts"]
    assert attempt["job_id"] is None
    assert squeue_jobs(attempt["job_name"]) == {}, "nothing may have run"
