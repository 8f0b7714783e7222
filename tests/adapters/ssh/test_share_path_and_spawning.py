"""Where a shared SSH connection lives and when its server is started (no server needed):
nothing shared through a directory others can enter, nor when persist_seconds is 0; no
server for a process that cannot log in; one spare helper after a burst."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.helpers.hang_guard import wait_until
from vibesys.adapters.transports import ssh_share
from vibesys.adapters.transports.ssh import SshTransport
from vibesys.adapters.transports.ssh_share_server import _Spare
from vibesys.config.slurm import SshTransportConfig
from vibesys.errors import BackendUnavailable, TransportLost


def test_nothing_is_shared_through_a_directory_others_can_enter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    directory = tmp_path / f"vibesys-{os.getuid()}"
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)
    config = SshTransportConfig(kind="ssh", host="login.example.org")
    assert ssh_share.share_path(config.model_dump_json()) is None
    assert SshTransport.from_config(config).pool.share is None
    directory.chmod(0o700)
    path = ssh_share.share_path(config.model_dump_json(exclude_defaults=True))
    assert path is not None and path.parent == directory
    assert SshTransport.from_config(config).pool.share == (
        path,
        config.model_dump_json(exclude_defaults=True),
    )
    # The same settings with every default written out (a recorded site's rendering): the
    # same shared connection.
    spelled = config.model_dump(mode="json", exclude_none=True, exclude={"jump_port"})
    assert SshTransport.from_config(SshTransportConfig.model_validate(spelled)).pool.share == (
        SshTransport.from_config(config).pool.share
    )


def test_persist_seconds_zero_shares_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    config = SshTransportConfig(kind="ssh", host="login.example.org", persist_seconds=0)
    assert SshTransport.from_config(config).pool.share is None
    assert SshTransport.from_config(config.model_copy(update={"persist_seconds": 5})).pool.share


def test_a_socket_that_does_not_say_ready_gives_no_helper(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def answer() -> None:
        client, _ = server.accept()
        client.sendall(b"something else\n")
        client.close()

    threading.Thread(target=answer, daemon=True).start()
    try:
        assert ssh_share.connect(path, 2.0) is None
    finally:
        server.close()
    with pytest.raises(ssh_share.NoServer):
        ssh_share.connect(path, 2.0)  # its file is left, nobody listens
    with pytest.raises(ssh_share.NoServer):
        ssh_share.connect(tmp_path / "absent.sock", 2.0)


def test_a_server_that_cannot_log_in_is_not_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a process whose own login worked starts the shared server: one that cannot log
    in would add a failed login per process (and some sites ban addresses for those)."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    started: list[tuple[Path, str]] = []
    monkeypatch.setattr(ssh_share, "spawn", lambda *share: started.append(share))
    config = SshTransportConfig(
        kind="ssh", host="127.0.0.1", port=1, connect_timeout_seconds=1.0, reconnect_attempts=1
    )
    transport = SshTransport.from_config(config)
    with pytest.raises((BackendUnavailable, TransportLost)):
        transport.run(["true"])
    assert started == []


def test_a_burst_of_processes_leaves_one_spare_helper_not_one_each() -> None:
    class Pool:
        def __init__(self) -> None:
            self.idle = 0
            self.warmed = 0
            self.gate = threading.Event()

        def idle_helpers(self) -> int:
            return self.idle

        def warm(self) -> None:
            self.gate.wait(5)
            self.warmed += 1
            self.idle += 1

    pool = Pool()
    spare = _Spare(pool)  # type: ignore[arg-type]
    for _ in range(10):  # ten processes took a helper while one refill was under way
        spare.refill()
    pool.gate.set()
    wait_until(lambda: pool.idle == 1, 20.0, "no spare helper was started")
    time.sleep(0.2)
    for _ in range(5):  # the spare is there: nothing more is started
        spare.refill()
    time.sleep(0.2)
    assert (pool.warmed, pool.idle) == (1, 1)
