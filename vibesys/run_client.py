"""`vibesys run` served by a warm process, as a build daemon serves its clients.

A `vibesys run` spends about a third of a second of CPU before its first scheduler command,
nearly all of it importing and building what every run needs (pydantic and its models alone
are over a third). N runs started at once on a small login node queue for the CPU, and the
last one submits seconds late. So a run whose standard streams are not terminals (scripts,
agents, batches) asks a server on this host that has imported all of it already: the server
forks, and the fork runs the evaluation with this process's argv, directory and streams, while
this process forwards signals to it and exits with its status.

What keeps it the same run:
- One server per exact context: the interpreter and its flags, the environment (all of it),
  the umask, ids and limits, and the installed code (vibesys's files and the import path's
  directories, by time and size). Anything different finds a server of its own; stale code
  never serves.
- The server forks as soon as this process connects; the fork says "ready", takes the request
  and the standard streams, and says "started" before any work. A server that does not
  answer in time (frozen, or gone) is passed over for running here, and a fork it makes
  later finds nobody and leaves. A fork that goes silent before "started" is killed, and
  only once it is provably dead, without having said it, does this process run the
  evaluation itself: one command line is one evaluation, never two.
- Following is not owning, and the fork is the owner: this process forwards SIGINT, SIGTERM,
  SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to it; when this process dies, even by SIGKILL, the
  fork kills itself, as this process's own driver would have died with it.
- With a terminal on any standard stream the run stays here (job control, the status line).
  `VIBESYS_RUN_SERVER=0` turns serving off.

Stdlib only, and nothing heavy: this runs before any of vibesys is imported.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from vibesys.private_dir import private_dir
from vibesys.proc import is_alive, start_time

__all__ = ["DISABLE", "FORWARDED", "PERSIST", "served", "server_key", "server_paths"]

#: Set to "0" to run every evaluation in its own process.
DISABLE = "VIBESYS_RUN_SERVER"
#: Seconds a server stays after its last client (an environment variable, so part of the key).
PERSIST = "VIBESYS_RUN_SERVER_PERSIST"
DEFAULT_PERSIST = 30.0
#: How long a client waits for a server that is starting (it then runs the evaluation itself).
STARTING_WAIT = 3.0
#: How long a client waits for the server's fork to say it is ready.
HANDSHAKE_WAIT = 2.0
FORWARDED = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
_PACKAGE = Path(__file__).resolve().parent
#: A fork: its pid and start time (`proc.start_time`), so a reused pid is never taken for it.
_Fork = tuple[int, str]
#: The server imports from this process's import path (`-m` would put "/" first instead).
_BOOT = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from vibesys.run_server import main; sys.exit(main(sys.argv[2:]))"
)
#: sun_path's size on Linux, with its terminating zero.
_SOCKET_PATH_LIMIT = 108


def served(argv: Sequence[str]) -> int | None:
    """Run `argv` (`run ...`) through a server: its exit status; None to run it here."""
    if os.environ.get(DISABLE) == "0" or any(_terminal(fd) for fd in (0, 1, 2)):
        return None
    try:
        cwd = os.getcwd()
        paths = server_paths()
    except OSError:
        return None  # a directory that is gone, say: the run here says what is wrong
    if paths is None:
        return None
    socket_path, lock_path = paths
    sock = _connect(socket_path)
    if sock is None and not _held(lock_path):
        # Nobody serves this context: start a server for the runs to come, and run this one
        # here meanwhile (waiting for the server would cost as much as importing).
        spawn(socket_path, lock_path)
        return None
    # A signal that comes while the run is handed over waits until it can go where the run
    # is: to the fork once it has started, else to this process, which then runs nothing.
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    try:
        if sock is None:
            sock = _await_server(socket_path, lock_path)  # one is starting: a burst waits
        fork = None if sock is None else _hand_over(sock, argv, cwd)
        forwarded: list[int] = []
        if fork is not None:
            pid = fork[0]
            for signum in FORWARDED:
                signal.signal(signum, lambda number, _frame: _forward(pid, number, forwarded))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    if sock is None or fork is None:
        return None
    return _follow(sock, fork, forwarded)


def server_key() -> str:
    """What must be equal for a server's fork to run exactly as this process would."""
    mask = os.umask(0)
    os.umask(mask)
    import resource

    limits = [resource.getrlimit(r) for r in (resource.RLIMIT_NOFILE, resource.RLIMIT_AS)]
    context = {
        "python": [sys.executable, sys.prefix, repr(sys.flags), sys.warnoptions, sys.path],
        "xoptions": sorted(map(str, sys._xoptions.items())),
        "environment": sorted(os.environ.items()),
        "process": [mask, os.getuid(), os.getgid(), os.getgroups(), limits, os.nice(0)],
        "code": [str(_PACKAGE), _code_fingerprint()],
    }
    text = json.dumps(context, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:24]


def server_paths() -> tuple[Path, Path] | None:
    """The socket and lock file of this context's server; None without a private directory."""
    directory = private_dir()
    if directory is None:
        return None
    key = server_key()
    socket_path = directory / f"run-{key}.sock"
    if len(os.fsencode(socket_path)) >= _SOCKET_PATH_LIMIT:
        return None
    return socket_path, directory / f"run-{key}.lock"


def spawn(socket_path: Path, lock_path: Path) -> None:
    """Start the server in the background, detached (a shell starts it and exits at once)."""
    import subprocess

    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            [
                "sh",
                "-c",
                '"$0" -c "$1" "$2" "$3" "$4" "$5" </dev/null >/dev/null 2>&1 &',
                sys.executable,
                _BOOT,
                json.dumps(sys.path),
                str(socket_path),
                str(lock_path),
                str(_PACKAGE),
            ],
            cwd="/",  # it outlives this process: it must not hold its directory
            start_new_session=True,
            check=False,
            timeout=10,
        )


def _code_fingerprint() -> list[object]:
    """vibesys's source files by time and size, and the import path's directories by time
    (installing or removing a package changes its directory's); not the working directory's,
    which a run changes."""
    seen: list[object] = []
    for root, dirs, files in os.walk(_PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                info = os.stat(os.path.join(root, name))
                seen.append([name, info.st_mtime_ns, info.st_size])
    here = os.getcwd()
    for entry in sys.path:
        if entry in ("", here):
            continue
        with contextlib.suppress(OSError):
            seen.append([entry, os.stat(entry or ".").st_mtime_ns])
    return seen


def _terminal(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(HANDSHAKE_WAIT)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None
    return sock


def _held(lock_path: Path) -> bool:
    """Whether a server holds the lock (running, or starting)."""
    import fcntl

    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return True  # cannot tell: do not start another
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def _await_server(path: Path, lock_path: Path) -> socket.socket | None:
    """The starting server's socket; None after STARTING_WAIT, or once the server has given
    up (its lock is free and nobody listens)."""
    deadline = time.monotonic() + STARTING_WAIT
    while time.monotonic() < deadline:
        time.sleep(0.02)
        sock = _connect(path)
        if sock is not None:
            return sock
        if not _held(lock_path):
            return None
    return None


def _hand_over(sock: socket.socket, argv: Sequence[str], cwd: str) -> _Fork | None:
    """Hand the run to the fork the server made for this connection: the fork once it has
    started; None when it did not start (then nothing ran, and nothing will)."""
    ready = _line(sock)  # the fork says so at once; a frozen or gone server says nothing
    started = start_time(int(ready[6:])) if ready[6:].isdigit() else None
    if not ready.startswith(b"ready ") or started is None:
        sock.close()
        return None  # nothing was handed over: a fork made later finds nobody and leaves
    fork = (int(ready[6:]), started)
    # The environment too: equal to the server's but for what its starting shell changed.
    fields = {"argv": list(argv), "cwd": cwd, "environment": dict(os.environ)}
    request = json.dumps(fields).encode("utf-8", "surrogateescape") + b"\n"
    try:
        socket.send_fds(sock, [request], [0, 1, 2])
        answer = _line(sock)
    except OSError:
        answer = b""
    if answer == b"no":
        sock.close()
        return None  # a form of `run` the fork leaves to the full parser
    if answer != b"started" and not _started_before_fence(sock, fork, answer):
        sock.close()
        return None  # dead, and it never started: the evaluation is this process's to run
    return fork


def _follow(sock: socket.socket, fork: _Fork, forwarded: list[int]) -> int:
    """The started fork's exit status, passing signals on meanwhile (into `forwarded`)."""
    sock.settimeout(None)
    answer = _line(sock)
    if answer.startswith(b"exit ") and answer[5:].isdigit():
        return int(answer[5:])
    if forwarded and _dead_within(fork, 2.0):
        # A signal passed on before the run set its handlers ended it as it would have ended
        # a run in its own process: end this one alike, so the caller sees the same. (Its
        # socket closes as it exits, a moment before the system counts it dead: hence the
        # wait.)
        signal.signal(forwarded[-1], signal.SIG_DFL)
        os.kill(os.getpid(), forwarded[-1])
    sys.stderr.write(
        f"vibesys: the process that ran this evaluation ({fork[0]}) ended without an exit "
        "status; `vibesys reconcile` settles its invocation\n"
    )
    return 1


def _started_before_fence(sock: socket.socket, fork: _Fork, heard: bytes) -> bool:
    """The fork said nothing in time: kill it, and once it is dead, whether it had said
    "started" (it says so before any work). Only a dead fork proves it will not start."""
    if is_alive(*fork):  # the same process: its pid is not yet some other's
        with contextlib.suppress(ProcessLookupError):
            os.kill(fork[0], signal.SIGKILL)
    if not _dead_within(fork, 10.0):
        return True  # not provably dead: it may run, so this process must not
    sock.setblocking(False)
    with contextlib.suppress(OSError):
        heard += sock.recv(64)
    return heard.startswith(b"started")


def _dead_within(fork: _Fork, seconds: float) -> bool:
    """Whether the fork is dead, or dies within `seconds`."""
    deadline = time.monotonic() + seconds
    while is_alive(*fork):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def _forward(pid: int, signum: int, forwarded: list[int]) -> None:
    forwarded.append(signum)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _line(sock: socket.socket) -> bytes:
    """One line from `sock`, or what came of it before its time limit, an error or the end."""
    data = bytearray()
    with contextlib.suppress(OSError):
        while not data.endswith(b"\n"):
            piece = sock.recv(1)
            if not piece:
                break
            data += piece
    return bytes(data).strip()
