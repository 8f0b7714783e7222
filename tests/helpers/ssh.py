"""What the SSH transport tests share: a transport to the local sshd (127.0.0.1:2222, every
connection stays there), throwaway keys, what an error lets an operator see, the sshd
processes serving a connection, and a TCP relay whose stop is a network outage."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from vibesys.adapters.transports.ssh import SshSettings, SshTransport

SSHD_PORT = 2222
PASSPHRASE = "correct horse battery staple 42"


def make(
    ssh_dir: Path,
    *,
    passphrase: str | None = None,
    env: Mapping[str, str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    **overrides: Any,
) -> SshTransport:
    """A transport to the local sshd; `overrides` are `SshSettings` fields."""
    options: dict[str, Any] = {
        "port": SSHD_PORT,
        "user": "root",
        "identity_file": str(ssh_dir / "id_ed25519"),
        "known_hosts": str(ssh_dir / "known_hosts"),
        "connect_timeout": 10.0,
        "reconnect_backoff": 0.05,
    }
    options.update(overrides)
    settings = SshSettings(host="127.0.0.1", **options)
    return SshTransport.from_settings(settings, passphrase=passphrase, env=env, sleep=sleep)


def host_key_line(ssh_dir: Path) -> tuple[str, str]:
    """(key type, base64 key) of the local sshd, from its known_hosts."""
    _, key_type, key = (ssh_dir / "known_hosts").read_text().split()[:3]
    return key_type, key


def new_key(path: Path, passphrase: str = "") -> Path:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-C", "test", "-f", str(path)],
        check=True,
        timeout=30,
    )
    return path


def secret_lines(key_file: Path) -> list[str]:
    return [line for line in key_file.read_text().splitlines() if "PRIVATE KEY" not in line]


def everything_said(error: BaseException) -> str:
    """All an operator could see of `error`: message, evidence and the full traceback."""
    return "\n".join(
        [str(error), getattr(error, "evidence", ""), *traceback.format_exception(error)]
    )


def sshd_pids_serving(local_port: int) -> list[int]:
    """The sshd processes holding the server end of our connection from `local_port`."""
    wanted_local = f"0100007F:{SSHD_PORT:04X}"
    wanted_remote = f"0100007F:{local_port:04X}"
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == wanted_local and fields[2] == wanted_remote:
            inodes.add(f"socket:[{fields[9]}]")
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "comm").read_text().strip() != "sshd":
                continue
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


class Proxy:
    """A TCP relay on 127.0.0.1 to the local sshd: stopping it is a network outage."""

    def __init__(self, port: int = 0) -> None:
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", port))
        self._listener.settimeout(0.1)
        self.port: int = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", SSHD_PORT))
            self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(1 << 16):
                target.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, target):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        self._stop.set()
        self._listener.close()
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


def proxied_known_hosts(ssh_dir: Path, path: Path, port: int) -> Path:
    key_type, key = host_key_line(ssh_dir)
    path.write_text(f"[127.0.0.1]:{port} {key_type} {key}\n")
    return path
