"""The local sshd's key directory (the session brings the local cluster and its sshd up, and
finds it through `scripts/local-slurm env`) and transports to it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT
from tests.helpers.ssh import make
from vibesys.adapters.transports.ssh import SshTransport

LOCAL_SLURM = ROOT / "scripts" / "local-slurm"


@pytest.fixture(scope="session")
def ssh_dir() -> Path:
    """DIR/ssh of the local cluster, brought up first (a no-op when it is up)."""
    up = subprocess.run(
        [str(LOCAL_SLURM), "up"], capture_output=True, text=True, timeout=600, check=False
    )
    if up.returncode != 0:
        pytest.fail(f"scripts/local-slurm up failed (rc={up.returncode}):\n{up.stderr}")
    env_file = subprocess.run(
        [str(LOCAL_SLURM), "env"], capture_output=True, text=True, timeout=60, check=True
    ).stdout.strip()
    found = Path(env_file).parent / "ssh"
    assert (found / "id_ed25519").is_file() and (found / "known_hosts").is_file()
    return found


@pytest.fixture
def ssh(ssh_dir: Path) -> Iterator[SshTransport]:
    transport = make(ssh_dir)
    yield transport
    transport.close()


@pytest.fixture(scope="module")
def shared_ssh(ssh_dir: Path) -> Iterator[SshTransport]:
    transport = make(ssh_dir)
    yield transport
    transport.close()
