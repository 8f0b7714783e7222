"""The server of a shared SSH connection (see `ssh_share`): started in the background by the
first process that found none, as `python -m vibesys.adapters.transports.ssh_share_server
SOCKET` with the site's transport table in its environment. It logs in, keeps one helper
started ahead, hands each process that connects a helper spliced to the socket, and leaves
`persist_seconds` after its last process has gone. One server per site: a lock file beside
the socket, held for its life.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from vibesys.adapters.transports.ssh import SshTransport
from vibesys.adapters.transports.ssh_pool import HelperPool
from vibesys.adapters.transports.ssh_share import CONFIG_VARIABLE, READY
from vibesys.config.slurm import SshTransportConfig
from vibesys.osutil.private_dir import listen_private

#: How long the server waits on a quiet splice before it looks again (its stderr drained).
SPLICE_POLL_SECONDS = 5.0
#: How often the server looks at whether it has been idle for long enough.
IDLE_POLL_SECONDS = 1.0


def serve(path: Path, config_json: str) -> int:
    """Serve helpers on `path` until idle for the table's `persist_seconds`; 0 when another
    server holds the site or this one has stopped, 1 when it could not connect."""
    lock = open(path.with_suffix(".lock"), "a")  # noqa: SIM115 - held until exit
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another server has this site
    config = SshTransportConfig.model_validate_json(config_json)
    transport = SshTransport.from_config(config, share=False)
    transport.warm()
    if not transport.pool.idle_helpers():
        return 1  # the processes connect on their own, and say what is wrong
    server = listen_private(path, 64)
    users = _Users()
    spare = _Spare(transport.pool)
    try:
        while True:
            readable, _, _ = select.select([server], [], [], IDLE_POLL_SECONDS)
            if readable:
                client, _ = server.accept()
                users.enter()
                threading.Thread(
                    target=_serve_one, args=(transport.pool, client, users, spare), daemon=True
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


class _Spare:
    """Keeps one helper started ahead: one refill at a time, and none while one is idle (a
    burst of processes must not leave a helper each behind, holding the site's sessions)."""

    def __init__(self, pool: HelperPool) -> None:
        self._pool = pool
        self._lock = threading.Lock()
        self._refilling = False

    def refill(self) -> None:
        with self._lock:
            if self._refilling:
                return
            self._refilling = True
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        try:
            if not self._pool.idle_helpers():
                self._pool.warm()
        finally:
            with self._lock:
                self._refilling = False


def _serve_one(pool: HelperPool, client: socket.socket, users: _Users, spare: _Spare) -> None:
    try:
        helper = pool.shared_helper_for_client()
        if helper is None:
            return
        # The next process should find a helper started: start it while this one works.
        spare.refill()
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
        print("usage: (started by vibesys) ssh_share_server SOCKET", file=sys.stderr)
        return 2
    return serve(Path(sys.argv[1]), config_json)


if __name__ == "__main__":
    sys.exit(main())
