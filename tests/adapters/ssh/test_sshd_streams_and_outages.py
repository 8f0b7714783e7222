"""Streams and outages against the real local sshd: large streams byte-identical in bounded
memory, connections lost mid-command, reconnect back-off, and timeouts."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.hang_guard import hang_guard, wait_until
from tests.helpers.paths import ROOT
from tests.helpers.ssh import (
    Proxy,
    make,
    proxied_known_hosts,
    sshd_pids_serving,
)
from vibesys.adapters.transports.ssh import SshTransport
from vibesys.errors import BackendUnavailable, TransportLost


@pytest.mark.slurm
def test_stream_of_50_mb_is_byte_identical(ssh: SshTransport, tmp_path: Path) -> None:
    source = tmp_path / "remote.log"
    with source.open("wb") as out:
        for _ in range(50):
            out.write(os.urandom(1 << 20))
    target = tmp_path / "spool.log"
    with target.open("wb") as sink:
        result = ssh.stream(["cat", str(source)], sink, timeout=120)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert target.stat().st_size == 50 << 20
    digest = hashlib.sha256
    assert digest(target.read_bytes()).digest() == digest(source.read_bytes()).digest()


_RSS_PROBE = """
import sys
from vibesys.adapters.transports.ssh import SshSettings, SshTransport

def hwm_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

key_dir, source, target = sys.argv[1:4]
transport = SshTransport.from_settings(SshSettings(
    host="127.0.0.1", port=2222, user="root",
    identity_file=key_dir + "/id_ed25519", known_hosts=key_dir + "/known_hosts"))
transport.run(["true"])
before = hwm_kib()
with open(target, "wb") as sink:
    result = transport.stream(["cat", source], sink, timeout=300)
print(result.returncode, before, hwm_kib())
"""


@pytest.mark.slurm
def test_stream_memory_stays_bounded(ssh_dir: Path, tmp_path: Path) -> None:
    source = tmp_path / "remote.log"
    with source.open("wb") as out:
        block = os.urandom(1 << 20)
        for _ in range(50):
            out.write(block)
    done = subprocess.run(
        [sys.executable, "-c", _RSS_PROBE, str(ssh_dir), str(source), str(tmp_path / "spool")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    returncode, before, after = (int(word) for word in done.stdout.split())
    assert returncode == 0
    assert (tmp_path / "spool").stat().st_size == 50 << 20
    growth_mib = (after - before) / 1024
    assert growth_mib < 40, f"peak RSS grew by {growth_mib:.1f} MiB while streaming 50 MiB"


class _CutAfter:
    """A sink that breaks the connection once `limit` bytes have been written to it."""

    def __init__(self, path: Path, limit: int, cut: Any) -> None:
        self.file = path.open("wb")
        self.limit = limit
        self.cut = cut
        self.written = 0
        self.fired = False

    def write(self, data: bytes) -> int:
        self.file.write(data)
        self.written += len(data)
        if self.written >= self.limit and not self.fired:
            self.fired = True
            self.cut()
        return len(data)

    def flush(self) -> None:
        self.file.flush()


@pytest.mark.slurm
@pytest.mark.parametrize("how", ["kill-sshd", "close-from-another-thread"])
def test_connection_lost_mid_stream_then_the_next_command_reconnects(
    ssh: SshTransport, tmp_path: Path, how: str
) -> None:
    ssh.run(["true"])
    transport = ssh.connection.paramiko_transport
    local_port = transport.sock.getsockname()[1]

    def cut() -> None:
        if how == "kill-sshd":
            pids = sshd_pids_serving(local_port)
            assert pids, "found no sshd process serving our connection"
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
        else:
            threading.Thread(target=ssh.close).start()

    first = 3_000_000
    # After the cut the remote loop dies of SIGPIPE at its next echo (no orphan left behind).
    script = f"head -c {first} /dev/zero; while :; do sleep 0.2; echo x; done"
    sink = _CutAfter(tmp_path / "spool", first, cut)
    with pytest.raises(TransportLost) as caught:
        ssh.stream(["sh", "-c", script], sink, timeout=60)
    sink.file.close()
    assert caught.value.maybe_submitted is False
    assert sink.fired
    kept = (tmp_path / "spool").read_bytes()
    assert len(kept) == sink.written >= first
    assert kept[:first] == b"\0" * first
    wait_until(lambda: not transport.is_active(), 10, "the cut connection to close")

    assert ssh.run(["echo", "back"], timeout=30).stdout == "back\n"
    assert ssh.connection.connections == 2
    assert ssh.connection.paramiko_transport is not transport


@pytest.mark.slurm
def test_lost_sbatch_is_transport_lost_with_maybe_submitted(ssh: SshTransport) -> None:
    ssh.run(["true"])
    local_port = ssh.connection.paramiko_transport.sock.getsockname()[1]

    def killer() -> None:
        time.sleep(0.5)
        for pid in sshd_pids_serving(local_port):
            os.kill(pid, signal.SIGKILL)

    threading.Thread(target=killer).start()
    with pytest.raises(TransportLost) as caught:
        ssh.run(["sh", "-c", "sleep 3; echo done"], maybe_effect=True, timeout=30)
    assert caught.value.maybe_submitted is True
    assert "connection lost" in str(caught.value)


@pytest.mark.slurm
def test_reconnect_backs_off_then_reports_transport_lost(ssh_dir: Path, tmp_path: Path) -> None:
    proxy = Proxy()
    port = proxy.port
    slept: list[float] = []
    transport = make(
        ssh_dir,
        port=port,
        known_hosts=str(proxied_known_hosts(ssh_dir, tmp_path / "known_hosts", port)),
        reconnect_attempts=3,
        reconnect_backoff=0.25,
        sleep=slept.append,
    )
    try:
        assert transport.run(["echo", "up"]).stdout == "up\n"
        first = transport.connection.paramiko_transport
        proxy.stop()  # the network goes away
        wait_until(lambda: not first.is_active(), 10, "the connection to notice the network gone")
        with pytest.raises(TransportLost) as caught:
            transport.run(["sbatch", "--parsable", "x.sh"], maybe_effect=True)
        # Never sent: the command did not run, whatever maybe_effect says.
        assert caught.value.maybe_submitted is False
        assert "not re-established after 3 attempts" in str(caught.value)
        assert slept == [0.25, 0.5]

        proxy = Proxy(port)  # the network comes back
        assert transport.run(["echo", "again"]).stdout == "again\n"
        assert transport.connection.connections == 2
    finally:
        transport.close()
        proxy.stop()


@pytest.mark.slurm
@pytest.mark.parametrize("maybe_effect", [True, False])
def test_timeout_is_backend_unavailable_and_the_connection_survives(
    ssh: SshTransport, maybe_effect: bool
) -> None:
    # The remote sleep may outlive the closed channel: short enough to leave no junk for long,
    # long enough that returning only when it ended would trip the guard.
    with (
        hang_guard(20, "a run that outlived its 1 s timeout"),
        pytest.raises(BackendUnavailable) as caught,
    ):
        ssh.run(["sleep", "40"], timeout=1, maybe_effect=maybe_effect)
    assert type(caught.value) is BackendUnavailable  # not TransportLost: the link is fine
    assert caught.value.maybe_submitted is maybe_effect
    assert "no answer within 1 s" in str(caught.value)
    assert ssh.run(["echo", "still"]).stdout == "still\n"
    assert ssh.connection.connections == 1


@pytest.mark.slurm
def test_stream_timeout(ssh: SshTransport, tmp_path: Path) -> None:
    with (tmp_path / "spool").open("wb") as sink, pytest.raises(BackendUnavailable) as caught:
        ssh.stream(["sh", "-c", "echo partial; sleep 5"], sink, timeout=1)
    assert caught.value.maybe_submitted is False
    assert (tmp_path / "spool").read_bytes() == b"partial\n"


@pytest.mark.slurm
def test_endless_output_still_times_out(ssh: SshTransport) -> None:
    class Counter:
        written = 0

        def write(self, data: bytes) -> None:
            self.written += len(data)

        def flush(self) -> None:
            pass

    sink = Counter()
    with (
        hang_guard(20, "an endless stream past its 1 s timeout"),
        pytest.raises(BackendUnavailable, match="no answer within 1 s"),
    ):
        ssh.stream(["yes"], sink, timeout=1)  # dies of SIGPIPE once its channel is closed
    assert sink.written > 0
    assert ssh.run(["echo", "ok"]).stdout == "ok\n"
