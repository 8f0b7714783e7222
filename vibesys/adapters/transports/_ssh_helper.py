"""The remote half of the `ssh` transport: one long-lived process per connection that runs
commands sent over its channel. Standard library only; it must keep running on Python 3.6 (no
walrus, no dataclasses, no `from __future__ import annotations`; annotations that Python
evaluates are written as strings).

Why: OpenSSH runs every command through the user's shell, and Debian's bash reads ~/.bashrc
for it (a pyenv or conda setup there costs hundreds of milliseconds). With this helper that
price is paid once per connection; each command is then started directly (argv, no shell)
in a few milliseconds. vibesys imports this module only to send its text.

Protocol, on the helper's stdin and stdout (its stderr is left to the shell's noise):
    helper -> client, once:  MAGIC, then a "ready" frame
    client -> helper:        one JSON line {"argv", "env", "timeout", "stdin"}, then `stdin`
                             bytes for the command's stdin
    helper -> client:        frames until the command's end: 1 type byte, 4 bytes big-endian
                             length, the payload. `o` stdout bytes, `e` stderr bytes, `x` the
                             end (JSON {"rc", "timeout"}), `E` the command could not start (JSON
                             {"errno", "strerror", "filename"}).
The command runs in its own session; at its time limit the whole session is sent SIGTERM,
then SIGKILL 2 seconds later, and its end is reported with "timeout": true. An empty line or
EOF on stdin ends the helper.
"""

import contextlib
import fcntl
import json
import os
import selectors
import signal
import struct
import subprocess
import sys
import threading
import time
from typing import IO, Any

MAGIC = b"\x00vibesys-ssh-helper-1\n"
CHUNK = 1 << 20
KILL_AFTER = 2.0
#: fcntl's F_SETPIPE_SZ on Linux (named in Python 3.10+): a bigger pipe lets one read take a
#: whole frame's worth of a fast command's output (64 KiB otherwise).
F_SETPIPE_SZ = 1031


def frame(out: "IO[bytes]", kind: bytes, payload: bytes) -> None:
    out.write(kind + struct.pack(">I", len(payload)))
    out.write(payload)


def feed(pipe: "IO[bytes]", data: bytes) -> None:
    # A command that stops reading lets its exit status tell.
    with contextlib.suppress(OSError):
        pipe.write(data)
    with contextlib.suppress(OSError):
        pipe.close()


def signal_group(process: "subprocess.Popen[bytes]", signum: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(process.pid, signum)


def run_one(request: "dict[str, Any]", data: bytes, out: "IO[bytes]") -> None:
    env: dict[str, str] | None = None
    if request.get("env") is not None:
        env = dict(os.environ)
        env.update(request["env"])
    try:
        process = subprocess.Popen(
            request["argv"],
            stdin=subprocess.PIPE if data else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        failure = {"errno": exc.errno, "strerror": exc.strerror, "filename": exc.filename}
        frame(out, b"E", json.dumps(failure).encode())
        out.flush()
        return
    feeder = None
    if data:
        feeder = threading.Thread(target=feed, args=(process.stdin, data))
        feeder.daemon = True
        feeder.start()
    timeout = request.get("timeout")
    deadline: float | None = None if timeout is None else time.monotonic() + timeout
    killed_at: float | None = None
    timed_out = False
    stdout, stderr = process.stdout, process.stderr
    assert stdout is not None and stderr is not None
    with contextlib.suppress(OSError, ValueError):
        fcntl.fcntl(stdout.fileno(), F_SETPIPE_SZ, CHUNK)
    selector = selectors.DefaultSelector()
    selector.register(stdout, selectors.EVENT_READ, b"o")
    selector.register(stderr, selectors.EVENT_READ, b"e")
    open_streams = 2
    while open_streams:
        wait = 1.0
        now = time.monotonic()
        if deadline is not None:
            if now >= deadline and not timed_out:
                timed_out = True
                killed_at = now + KILL_AFTER
                signal_group(process, signal.SIGTERM)
            if killed_at is not None and now >= killed_at:
                signal_group(process, signal.SIGKILL)
                killed_at = None
            wait = max(0.01, min(wait, (killed_at or deadline) - now))
        for key, _ in selector.select(wait):
            stream = key.fileobj
            fd = stream if isinstance(stream, int) else stream.fileno()
            chunk = os.read(fd, CHUNK)
            if not chunk:
                selector.unregister(key.fileobj)
                open_streams -= 1
                continue
            frame(out, key.data, chunk)
        out.flush()
    selector.close()
    while True:
        try:
            rc = process.wait(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                timed_out = True
                signal_group(process, signal.SIGKILL)
    if feeder is not None:
        feeder.join(1.0)
    frame(out, b"x", json.dumps({"rc": rc, "timeout": timed_out}).encode())
    out.flush()


def main() -> int:
    source = sys.stdin.buffer
    out = sys.stdout.buffer
    out.write(MAGIC)
    frame(out, b"R", json.dumps({"python": sys.version.split()[0]}).encode())
    out.flush()
    while True:
        line = source.readline()
        if not line.strip():
            return 0
        request = json.loads(line.decode("utf-8"))
        size = int(request.get("stdin") or 0)
        data = source.read(size) if size else b""
        if len(data) != size:
            return 1
        run_one(request, data, out)


if __name__ == "__main__":
    sys.exit(main())
