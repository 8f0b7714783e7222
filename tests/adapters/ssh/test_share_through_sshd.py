"""One SSH connection shared by this host's processes (`ssh_share`), against the real local
sshd: a later process runs its commands through the first one's server without logging in;
frozen or killed servers and served processes; the server leaves once idle."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from msgspec.structs import replace

from tests.helpers.hang_guard import wait_until
from tests.helpers.ssh_share import (
    process,
    python_with_transport,
    refused,
    server_pid,
    site,
)
from vibesys.adapters.transports import ssh_share
from vibesys.adapters.transports.ssh import SshTransport
from vibesys.adapters.transports.ssh_settings import helper_launch
from vibesys.config.slurm import SshTransportConfig
from vibesys.errors import BackendUnavailable, TransportLost


@pytest.fixture
def shared(tmp_path: Path, ssh_dir: Path) -> Iterator[tuple[SshTransportConfig, Path, int]]:
    """A site whose shared connection is up: the first process (a transport here) connected
    on its own and started the server."""
    config = site(tmp_path, ssh_dir)
    first = SshTransport.from_config(config)
    assert first.pool.share is not None
    path = first.pool.share[0]
    assert first.run(["true"]).returncode == 0
    assert first.connection.connections == 1  # the first one finds no server: it logs in itself
    pid = wait_until(
        lambda: path.exists() and server_pid(path), 20.0, "the shared server never came up"
    )
    first.close()
    yield config, path, pid
    for running in (pid, server_pid(path)):
        for sig in (signal.SIGCONT, signal.SIGKILL):
            if running is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(running, sig)
    path.unlink(missing_ok=True)  # what a killed server leaves
    path.with_suffix(".lock").unlink(missing_ok=True)


@pytest.mark.slurm
def test_a_later_process_runs_its_commands_without_logging_in(
    shared: tuple[SshTransportConfig, Path, int],
) -> None:
    config, _path, _pid = shared
    with process(config) as later:
        echoed = later.run(["sh", "-c", 'cat; echo " $PPID"'], input=b"through the server")
        again = later.run(["sh", "-c", "echo $PPID"])
        assert later.connection.connections == 0  # no login of its own
        assert echoed.returncode == 0 and echoed.stdout.startswith("through the server ")
        # One helper serves the process's commands one after another.
        assert echoed.stdout.split()[-1] == again.stdout.strip()
        failed = later.run(["sh", "-c", "echo oops >&2; exit 3"])
        assert (failed.returncode, failed.stderr.strip()) == (3, "oops")
    # The next process gets a helper of its own (each helper serves one process).
    with process(config) as other:
        assert other.run(["sh", "-c", "echo $PPID"]).stdout.strip() != again.stdout.strip()
        assert other.connection.connections == 0


@pytest.mark.slurm
def test_a_frozen_server_is_passed_over_before_anything_is_sent(
    shared: tuple[SshTransportConfig, Path, int], tmp_path: Path
) -> None:
    config, _path, pid = shared
    marker = tmp_path / "ran"
    os.kill(pid, signal.SIGSTOP)
    try:
        with process(config) as later:
            started = time.monotonic()
            result = later.run(["sh", "-c", f"echo once >> {marker}"])
            waited = time.monotonic() - started
            assert result.returncode == 0
            assert later.connection.connections == 1  # it went its own way ...
            assert waited >= config.connect_timeout_seconds  # ... after the server's silence
    finally:
        os.kill(pid, signal.SIGCONT)
    time.sleep(0.5)  # what the thawed server got (a connection, no request) runs nothing
    assert marker.read_text() == "once\n"


@pytest.mark.slurm
def test_a_server_frozen_mid_command_is_an_answer_lost_that_may_have_run(
    shared: tuple[SshTransportConfig, Path, int],
) -> None:
    config, _path, pid = shared
    try:
        with process(config) as later:
            assert later.run(["true"]).returncode == 0  # the helper is taken
            threading.Timer(0.3, os.kill, (pid, signal.SIGSTOP)).start()
            with pytest.raises(BackendUnavailable) as raised:
                later.run(["sh", "-c", "sleep 1; echo late"], timeout=2, maybe_effect=True)
            assert raised.value.maybe_submitted is True
            assert later.connection.connections == 0
    finally:
        os.kill(pid, signal.SIGCONT)


@pytest.mark.slurm
def test_a_server_killed_mid_command_is_a_lost_transport_that_may_have_run(
    shared: tuple[SshTransportConfig, Path, int],
) -> None:
    config, _path, pid = shared
    with process(config) as later:
        assert later.run(["true"]).returncode == 0
        threading.Timer(0.3, os.kill, (pid, signal.SIGKILL)).start()
        started = time.monotonic()
        with pytest.raises(TransportLost) as raised:
            later.run(["sleep", "30"], timeout=60, maybe_effect=True)
        assert raised.value.maybe_submitted is True
        assert time.monotonic() - started < 10  # the end of the socket says it at once


@pytest.mark.slurm
def test_the_server_leaves_once_idle_for_persist_seconds(tmp_path: Path, ssh_dir: Path) -> None:
    config = site(tmp_path, ssh_dir, persist_seconds=1.0)
    with process(config) as first:
        assert first.pool.share is not None
        path = first.pool.share[0]
        first.run(["true"])
    pid = wait_until(
        lambda: path.exists() and server_pid(path), 20.0, "the shared server never came up"
    )
    with process(config) as later:
        later.run(["true"])
        time.sleep(2.0)  # longer than persist_seconds, but a process is still being served
        assert server_pid(path) == pid
    wait_until(lambda: server_pid(path) is None and not path.exists(), 10, "the server stayed")


@pytest.mark.slurm
def test_a_dead_servers_socket_is_replaced_by_the_next_process(
    shared: tuple[SshTransportConfig, Path, int],
) -> None:
    config, path, pid = shared
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: refused(path), 20.0, "the server's socket still answers")
    assert path.exists()  # its socket file stays behind
    with process(config) as second:
        assert second.run(["true"]).returncode == 0
        assert second.connection.connections == 1  # nobody listens: it logs in itself ...
    # ... and starts a new server for the next process.
    wait_until(lambda: not refused(path), 20.0, "no new server listens")
    new_pid = server_pid(path)
    assert new_pid is not None and new_pid != pid
    with process(config) as third:
        assert third.run(["true"]).returncode == 0
        assert third.connection.connections == 0


@pytest.mark.slurm
def test_a_site_without_a_helper_starts_no_server(
    tmp_path: Path,
    ssh_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without python3 on the remote side there is no helper to share: the commands run one
    channel each, and no server is started (it would only add a login per process)."""
    started: list[tuple[Path, str]] = []
    monkeypatch.setattr(ssh_share, "spawn", lambda *share: started.append(share))
    with process(site(tmp_path, ssh_dir)) as transport:
        no_python = replace(transport.settings, helper_pythons=("/nonexistent/python3",))
        transport.pool.launch = helper_launch(no_python)
        assert transport.run(["echo", "one channel"]).stdout == "one channel\n"
        assert transport.pool.helpers_started == 0
    assert started == []
    (tmp_path / "other").mkdir()
    with process(site(tmp_path / "other", ssh_dir)) as working:
        assert working.run(["true"]).returncode == 0
    assert len(started) == 1  # a helper worked there: the next processes get a server


@pytest.mark.slurm
def test_a_process_served_by_the_shared_connection_never_logs_in(
    shared: tuple[SshTransportConfig, Path, int],
) -> None:
    config, _path, _pid = shared
    done = subprocess.run(
        python_with_transport(
            config,
            "done = transport.run(['echo', 'served'])",
            "print(done.stdout.strip(), transport.connection.connections)",
        ),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["served", "0"]


@pytest.mark.slurm
def test_a_served_process_frozen_or_killed_mid_command_does_not_stop_the_others(
    shared: tuple[SshTransportConfig, Path, int],
) -> None:
    """Following is not owning: a process the server serves may freeze or die in the middle
    of a command; the server goes on serving the others."""
    config, path, pid = shared
    busy = subprocess.Popen(
        python_with_transport(
            config,
            "transport.run(['true'])",
            "print('served', transport.connection.connections, flush=True)",
            "transport.run(['sh', '-c', 'yes | head -c 50000000; sleep 60'], timeout=120)",
        ),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert busy.stdout is not None and busy.stdout.readline() == "served 0\n"
        time.sleep(1.0)  # its command now fills the pipes towards the frozen process
        os.kill(busy.pid, signal.SIGSTOP)
        with process(config) as other:
            assert other.run(["echo", "still served"]).stdout == "still served\n"
            assert other.connection.connections == 0
        os.kill(busy.pid, signal.SIGKILL)
        busy.wait(timeout=10)
        with process(config) as third:
            assert third.run(["echo", "and after"]).stdout == "and after\n"
            assert third.connection.connections == 0
        assert server_pid(path) == pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(busy.pid, signal.SIGKILL)
        busy.wait(timeout=10)
        if busy.stdout is not None:
            busy.stdout.close()
