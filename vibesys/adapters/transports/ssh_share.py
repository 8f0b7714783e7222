"""One SSH connection shared by this host's vibesys processes for one site, as OpenSSH's
ControlMaster with ControlPersist.

Every `vibesys run` is a process of its own, and over SSH each one used to log in and start
the remote helper: a key exchange, an authentication (a second factor on some sites) and a
remote shell reading the account's startup files, often a good part of a second before the
first command. With `persist_seconds` above 0, the first process that finds no shared
connection goes on with a connection of its own and, once its login and helper work, starts
one in the background (`ssh_share_server.py`); later processes ask it for a helper over a Unix
socket in a private directory and run their commands through that helper, with no login.

What a process gets is a started remote helper, spliced byte for byte between the socket and
the helper's channel: it speaks the helper's protocol itself (`ssh_session.HelperSession`), so
time limits, lost connections and what they prove are exactly as on its own connection. The
server keeps one helper started ahead, so the next process does not wait for a remote shell;
a helper serves one process and ends with it. The server leaves `persist_seconds` after its
last process has gone.

Nothing here is trusted beyond what a private socket gives: the directory must be ours and
closed to others (else nothing is shared); a server that does not say "ready" in time (frozen,
or busy logging in) is passed over for this process's own connection, which is safe because no
command was sent yet.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import select
import socket
import subprocess
import sys
from pathlib import Path

from vibesys.osutil.private_dir import private_dir

__all__ = ["READY", "SHARED", "NoServer", "SocketChannel", "connect", "share_path", "spawn"]

#: The generation of helpers that came from a shared connection (never this process's own).
SHARED = -1
#: What the server says once a helper is ready on the socket.
READY = b"vibesys-shared-helper ready\n"
#: The environment variable that hands the server its site's transport table (JSON).
CONFIG_VARIABLE = "VIBESYS_SSH_SHARE_CONFIG"


def share_path(config_json: str) -> Path | None:
    """The socket of the shared connection for one transport table (its JSON)."""
    directory = private_dir()
    if directory is None:
        return None
    digest = hashlib.sha256(config_json.encode("utf-8")).hexdigest()[:24]
    return directory / f"ssh-{digest}.sock"


def spawn(path: Path, config_json: str) -> None:
    """Start the server for `path` in the background, detached from this process (a shell
    starts it and exits at once, so no child of ours is left running or unreaped)."""
    with contextlib.suppress(OSError):
        subprocess.run(
            [
                "sh",
                "-c",
                '"$0" -m vibesys.adapters.transports.ssh_share_server "$1" '
                "</dev/null >/dev/null 2>&1 &",
                sys.executable,
                str(path),
            ],
            env={**os.environ, CONFIG_VARIABLE: config_json},
            cwd="/",  # it outlives this process: it must not hold its directory
            start_new_session=True,
            check=False,
            timeout=10,
        )


class NoServer(Exception):
    """Nobody listens on the socket (none yet, or one that died and left its file)."""


def connect(path: Path, timeout: float) -> socket.socket | None:
    """A socket with a ready helper behind it; None when the server there gave none in time
    (or said something else); NoServer when there is no server."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        raise NoServer(str(path)) from None
    except OSError:
        sock.close()
        return None
    try:
        answer = bytearray()
        while not answer.endswith(b"\n") and len(answer) <= len(READY):
            piece = sock.recv(len(READY) - len(answer) or 1)
            if not piece:
                break
            answer += piece
    except OSError:
        sock.close()
        return None
    if bytes(answer) != READY:
        sock.close()
        return None
    sock.settimeout(None)  # from here the helper session waits with select and its deadlines
    return sock


class SocketChannel:
    """The part of a paramiko channel a `HelperSession` uses, over a shared helper's socket."""

    exit_status = -1

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.closed = False
        self.eof_received = False

    def fileno(self) -> int:
        return self.sock.fileno()

    def recv_ready(self) -> bool:
        if self.closed or self.eof_received:
            return False
        readable, _, _ = select.select([self.sock], [], [], 0)
        return bool(readable)

    def recv(self, size: int) -> bytes:
        data = self.sock.recv(size)
        if not data:
            self.eof_received = True
        return data

    def recv_stderr_ready(self) -> bool:
        return False  # the server keeps the helper's stderr (the login shell's noise)

    def recv_stderr(self, size: int) -> bytes:
        return b""

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)

    def exit_status_ready(self) -> bool:
        return self.eof_received

    def close(self) -> None:
        self.closed = True
        self.sock.close()
