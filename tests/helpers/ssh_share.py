"""What the shared-connection tests share: a site of their own, finding and probing its
server, and the transports of other processes."""

from __future__ import annotations

import contextlib
import shutil
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.helpers.ssh import SSHD_PORT
from vibesys.adapters.transports.ssh import SshTransport
from vibesys.config.slurm import SshTransportConfig


def site(tmp_path: Path, ssh_dir: Path, **overrides: Any) -> SshTransportConfig:
    """A site table of its own: its known_hosts is a copy under `tmp_path`, so its shared
    connection is this test's alone."""
    known = tmp_path / "known_hosts"
    shutil.copy(ssh_dir / "known_hosts", known)
    options: dict[str, Any] = {
        "kind": "ssh",
        "host": "127.0.0.1",
        "port": SSHD_PORT,
        "user": "root",
        "identity_file": str(ssh_dir / "id_ed25519"),
        "known_hosts": str(known),
        "connect_timeout_seconds": 2.0,
        "persist_seconds": 20.0,
    }
    options.update(overrides)
    return SshTransportConfig(**options)


def server_pid(path: Path) -> int | None:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"vibesys.adapters.transports.ssh_share_server" in argv and str(path).encode() in argv:
            return int(entry.name)
    return None


def refused(path: Path) -> bool:
    """Nobody listens on `path` any more (a killed server's socket closes a moment after its
    process is gone)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except ConnectionRefusedError:
        return True
    finally:
        probe.close()
    return False


def python_with_transport(config: SshTransportConfig, *lines: str) -> list[str]:
    """The argv of another Python process that builds the site's transport (as `transport`)
    and runs `lines`: a clean interpreter, a process of its own."""
    program = "\n".join(
        [
            "import sys",
            "from vibesys.adapters.transports.ssh import SshTransport",
            "from vibesys.config.slurm import SshTransportConfig as Config",
            "transport = SshTransport.from_config(Config.model_validate_json(sys.argv[1]))",
            *lines,
        ]
    )
    return [sys.executable, "-c", program, config.model_dump_json(exclude_unset=True)]


@contextlib.contextmanager
def process(config: SshTransportConfig) -> Iterator[SshTransport]:
    """The transport of another vibesys process for the site, closed at the end."""
    transport = SshTransport.from_config(config)
    try:
        yield transport
    finally:
        transport.close()
