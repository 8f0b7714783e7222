"""One SSH connection shared by this host's vibesys processes for one site, as OpenSSH's
ControlMaster with ControlPersist.

Every `vibesys run` is a process of its own, and over SSH each one used to log in and start
the remote helper: a key exchange, an authentication (a second factor on some sites) and a
remote shell reading the account's startup files, often a good part of a second before the
first command. With `persist_seconds` above 0 the first process that finds no shared
connection starts one in the background (`python -m vibesys.adapters.transports.ssh_share`)
and goes on with a connection of its own; later processes ask it for a helper over a Unix
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
import fcntl
import hashlib
import os
import select
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vibesys.adapters.transports.ssh import SshTransport

__all__ = ["READY", "SHARED", "NoServer", "SocketChannel", "connect", "share_path", "spawn"]

#: The generation of helpers that came from a shared connection (never this process's own).
SHARED = -1
#: What the server says once a helper is ready on the socket.
READY = b"vibesys-shared-helper ready\n"
#: The environment variable that hands the server its site's transport table (JSON).
CONFIG_VARIABLE = "VIBESYS_SSH_SHARE_CONFIG"
#: How long the server waits on a quiet splice before it looks again (its stderr drained).
SPLICE_POLL_SECONDS = 5.0
#: How often the server looks at whether it has been idle for long enough.
IDLE_POLL_SECONDS = 1.0


def share_dir() -> Path | None:
    """This user's private directory for shared connections; None when it cannot be made
    private (then nothing is shared)."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    path = Path(base) / f"vibesys-{os.getuid()}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError:
        return None
    private = info.st_uid == os.getuid() and not info.st_mode & 0o077
    return path if stat.S_ISDIR(info.st_mode) and private else None


def share_path(config_json: str) -> Path | None:
    """The socket of the shared connection for one transport table (its JSON)."""
    directory = share_dir()
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
                '"$0" -m vibesys.adapters.transports.ssh_share "$1" </dev/null >/dev/null 2>&1 &',
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


# -- the server ---------------------------------------------------------------------------------


def serve(path: Path, config_json: str) -> int:
    """Serve helpers on `path` until idle for the table's `persist_seconds`; 0 when another
    server holds the site or this one has stopped, 1 when it could not connect."""
    from vibesys.adapters.transports.ssh import SshTransport
    from vibesys.config.slurm import SshTransportConfig

    lock = open(path.with_suffix(".lock"), "a")  # noqa: SIM115 - held until exit
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another server has this site
    config = SshTransportConfig.model_validate_json(config_json)
    transport = SshTransport.from_config(config, share=False)
    transport.warm()
    if not transport.idle_helpers():
        return 1  # the processes connect on their own, and say what is wrong
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o177)
    try:
        server.bind(str(path))
    finally:
        os.umask(previous)
    server.listen(64)
    users = _Users()
    try:
        while True:
            readable, _, _ = select.select([server], [], [], IDLE_POLL_SECONDS)
            if readable:
                client, _ = server.accept()
                users.enter()
                threading.Thread(
                    target=_serve_one, args=(transport, client, users), daemon=True
                ).start()
            elif users.idle_for() > config.persist_seconds:
                return 0
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        server.close()
        transport.close()


class _Users:
    """How many processes are being served, and since when none is."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._since = time.monotonic()

    def enter(self) -> None:
        with self._lock:
            self._count += 1

    def leave(self) -> None:
        with self._lock:
            self._count -= 1
            self._since = time.monotonic()

    def idle_for(self) -> float:
        with self._lock:
            return 0.0 if self._count else time.monotonic() - self._since


def _serve_one(transport: SshTransport, client: socket.socket, users: _Users) -> None:
    try:
        helper = transport.shared_helper_for_client()
        if helper is None:
            return
        # The next process should find a helper started: start it while this one works.
        threading.Thread(target=transport.warm, daemon=True).start()
        try:
            client.sendall(READY)
            _splice(client, helper.channel)
        except OSError:
            pass  # the process went away: its helper goes with it
        finally:
            helper.close()
    finally:
        client.close()
        users.leave()


def _splice(client: socket.socket, channel: Any) -> None:
    """Copy bytes both ways until either side ends."""
    while True:
        readable, _, _ = select.select([client, channel], [], [], SPLICE_POLL_SECONDS)
        while channel.recv_stderr_ready():
            channel.recv_stderr(1 << 16)
        if channel.recv_ready():
            data = channel.recv(1 << 16)
            if not data:
                return
            client.sendall(data)
        elif channel.eof_received or channel.closed:
            return
        if client in readable:
            data = client.recv(1 << 16)
            if not data:
                return
            channel.sendall(data)


def main() -> int:
    config_json = os.environ.get(CONFIG_VARIABLE)
    if len(sys.argv) != 2 or not config_json:
        print("usage: (started by vibesys) ssh_share SOCKET", file=sys.stderr)
        return 2
    return serve(Path(sys.argv[1]), config_json)


if __name__ == "__main__":
    sys.exit(main())
