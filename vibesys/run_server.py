"""The warm process behind `run_client.py`: it imports what `vibesys run` needs once, then
forks once per client, and the fork runs that client's evaluation.

    main([SOCKET, LOCK, PACKAGE]), from `python -c` with the client's import path

Started by a client with that client's whole environment, umask and import path (the socket's
name is their digest), from "/"; it serves only if it imported the client's vibesys. It holds
LOCK while it lives, so one server serves a context; it listens on SOCKET (mode 0600, in the
user's private directory) and serves only its own user (SO_PEERCRED). It leaves
`VIBESYS_RUN_SERVER_PERSIST` seconds (default 30) after its last client. It stays
single-threaded and opens no journal, so every fork starts clean.

The fork is made as soon as a client connects, and it, not the server, takes the client's
request and standard streams: a server frozen before forking holds nothing of the client's.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from vibesys.private_dir import listen_private
from vibesys.run_client import DEFAULT_PERSIST, PERSIST

#: How long a fork waits for its client's request before leaving without running anything.
REQUEST_WAIT = 10.0
_REQUEST_LIMIT = 1 << 20
#: The lock this server holds while it lives (a fork closes its copy, so that a long run does
#: not keep the next server from starting once this one has left).
_lock_fd = -1


def main(argv: list[str]) -> int:
    # Its forks run evaluations that must hear SIGINT and SIGTERM, whatever mask it inherited.
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    socket_path, lock_path, package = Path(argv[0]), Path(argv[1]), Path(argv[2])
    if Path(__file__).resolve().parent != package:
        return 0  # the client imported another vibesys (its own path first): not ours to serve
    global _lock_fd
    lock = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    if not _take(lock):
        return 0  # another server serves this context, or is starting
    _lock_fd = lock
    with contextlib.suppress(Exception):
        warm()  # what fails to load here fails in the fork as it would in a run of its own
    persist = _persist_seconds()
    listener = listen_private(socket_path, 128)
    last = time.monotonic()
    while True:
        _reap()
        ready, _, _ = select.select([listener], [], [], 0.5)
        if ready:
            conn, _ = listener.accept()
            last = time.monotonic()
            _serve(conn, listener)
        elif time.monotonic() - last > persist:
            break
    # The socket goes first: a client from now on starts a new server rather than wait here.
    with contextlib.suppress(FileNotFoundError):
        socket_path.unlink()
    listener.close()
    os.close(lock)
    return 0


def _take(lock: int) -> bool:
    """The lock, or False when another server holds it. A client asking whether a server is
    there holds it for an instant: a few tries tell that from a server that lives."""
    for _ in range(20):
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            time.sleep(0.01)
        else:
            return True
    return False


def warm() -> None:
    """Import, and build the validators of, everything a run may need."""
    import vibesys.cli_common
    import vibesys.engine
    import vibesys.run_checks
    import vibesys.run_command
    import vibesys.run_options  # noqa: F401
    from vibesys.adapters.registry import ADAPTERS
    from vibesys.config.slurm import SlurmSiteConfig

    for entry in ADAPTERS.values():
        with contextlib.suppress(Exception):
            module: Any = entry.load()
            with contextlib.suppress(Exception):
                module.Request.model_validate({})  # builds the validator; the data is wrong
    with contextlib.suppress(Exception):
        SlurmSiteConfig.model_validate({})


def _persist_seconds() -> float:
    try:
        return max(0.0, float(os.environ.get(PERSIST, DEFAULT_PERSIST)))
    except ValueError:
        return DEFAULT_PERSIST


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _serve(conn: socket.socket, listener: socket.socket) -> None:
    """Fork for this client at once: the fork, not this process, takes its request and its
    descriptors, so that a server frozen before it forked holds nothing of the client's."""
    try:
        if _same_user(conn) and os.fork() == 0:
            status = 1
            try:
                status = _run_fork(conn, listener)
            except BaseException:  # the fork must never return into the server's loop
                with contextlib.suppress(Exception):
                    traceback.print_exc()
            finally:
                os._exit(status)
    except OSError:
        pass
    finally:
        conn.close()


def _same_user(conn: socket.socket) -> bool:
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    uid: int = struct.unpack("3i", raw)[1]
    return uid == os.getuid()


def _run_fork(conn: socket.socket, listener: socket.socket) -> int:
    listener.close()
    os.close(_lock_fd)
    conn.settimeout(REQUEST_WAIT)
    conn.sendall(f"ready {os.getpid()}\n".encode())
    data, fds, _flags, _address = socket.recv_fds(conn, 65536, 3)
    request = bytearray(data)
    while data and not request.endswith(b"\n") and len(request) < _REQUEST_LIMIT:
        data = conn.recv(65536)
        request += data
    if len(fds) != 3 or not request.endswith(b"\n"):
        return 0  # the client gave up, or sent no streams: it runs the evaluation itself
    fields = json.loads(request.decode("utf-8", "surrogateescape"))
    argv = [str(word) for word in fields["argv"]]
    from vibesys.run_options import parse_run_argv

    values = parse_run_argv(argv[1:]) if argv[:1] == ["run"] else None
    if values is None:
        conn.sendall(b"no\n")
        return 0
    os.chdir(str(fields["cwd"]))
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in fields["environment"].items()})
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    _reopen_streams()
    # Said before any work: a client that hears nothing kills this fork and, once it is dead,
    # runs the evaluation itself only if this was never said.
    try:
        conn.sendall(b"started\n")
    except OSError:
        return 0  # the client is gone before anything began: nothing is run for nobody
    conn.settimeout(None)
    threading.Thread(target=_die_with_client, args=(conn,), daemon=True).start()
    sys.argv = ["vibesys", *argv]
    from vibesys.run_command import execute_run

    status = execute_run(values)  # as `cli_fast.run_evaluation`, whose parse is above
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    conn.sendall(f"exit {status}\n".encode())
    return status


def _reopen_streams() -> None:
    """Standard streams over the client's descriptors, as Python opens them for a process
    whose streams are not terminals (the only kind served): stdout block-buffered, stderr
    line-buffered, in the encoding this context's locale gives (the server's, the same)."""
    encoding, errors = sys.stdout.encoding, sys.stdout.errors
    sys.stdin = io.TextIOWrapper(
        io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding, sys.stdin.errors
    )
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding, errors
    )
    sys.stderr = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
        sys.stderr.encoding,
        sys.stderr.errors,
        line_buffering=True,
    )


def _die_with_client(conn: socket.socket) -> None:
    """The client's end closing means it died: so does this run, as its driver would have."""
    with contextlib.suppress(OSError):
        while conn.recv(64):
            pass
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
