#!/usr/bin/env python3
"""vibesys-gpu: run one command on GPUs, as its own Slurm job, through the host's broker.

    vibesys-gpu [--gpus N] [--time MINUTES] [--profile NAME] -- COMMAND [ARGS...]

The command runs on a compute node in the host's environment, confined to the workspace, with
the current directory as its working directory. Its output streams back as it is produced and
the exit status is the command's own. Interrupting this client (Ctrl-C, SIGTERM, SIGHUP) or
losing the connection cancels the job, whether it is queued or running. With --profile NAME the
command runs under the profiler the operator configured by that name, and once the job ended
its capture files are written into the current directory, each checked against the sha256 the
broker recorded (a mismatch is removed and reported). GPU commands are for
the agent's own iteration: they are not evaluations and produce no evidence.

The broker is found through $VIBESYS_GPU_SOCKET and the run's token in $VIBESYS_GPU_TOKEN.
Exit statuses besides the command's: 2 refused (the reason is printed), 130 interrupted,
255 the connection to the broker was lost.

This file uses only the standard library, so it runs in any image that has python3; it is
installed as the `vibesys-gpu` command and is also reachable as `python3 $VIBESYS_GPU`.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import os
import re
import signal
import socket
import sys
from typing import Any, NoReturn

PROTOCOL_VERSION = 1
SOCKET_ENV = "VIBESYS_GPU_SOCKET"
TOKEN_ENV = "VIBESYS_GPU_TOKEN"
#: Replies carry at most ~64 KiB of output; anything far larger is not our broker talking.
MAX_REPLY_BYTES = 1 << 21

EXIT_REFUSED = 2
EXIT_INTERRUPTED = 130
EXIT_LOST = 255
#: A capture is one file in the current directory: never a path, never hidden.
CAPTURE_NAME = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]{0,254}")


class Interrupted(Exception):
    pass


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="vibesys-gpu",
        description="Run COMMAND on GPUs as its own Slurm job, through the vibesys broker.",
        epilog="Example: vibesys-gpu --gpus 1 --time 10 -- python -m pytest tests/gpu",
    )
    parser.add_argument("--gpus", type=int, default=1, help="GPUs for the job (default 1)")
    parser.add_argument(
        "--time",
        type=int,
        default=None,
        metavar="MINUTES",
        help="time limit in minutes "
        "(default: the operator's default_time_minutes); it starts when the job is submitted",
    )
    parser.add_argument(
        "--timeout-seconds",
        type=int,
        default=None,
        metavar="S",
        help="end the command S seconds after it was submitted, exactly (it covers the wait in "
        "Slurm's queue and the run; exit status 124); the time limit defaults to S rounded up to "
        "whole minutes",
    )
    parser.add_argument(
        "--profile",
        default=None,
        metavar="NAME",
        help="run COMMAND under the site's profiler NAME (see `vibesys-eval capabilities`); "
        "its captures are written into the current directory",
    )
    parser.add_argument(
        "--socket", default=None, help=f"the broker's socket (default: ${SOCKET_ENV})"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("no command given; usage: vibesys-gpu [--gpus N] [--time MINUTES] -- CMD")
    if args.timeout_seconds is not None and args.timeout_seconds <= 0:
        parser.error(f"--timeout-seconds {args.timeout_seconds}: must be a positive integer")
    return args


def call_line(args: argparse.Namespace, token: str, cwd: str) -> bytes:
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    body = {
        "version": PROTOCOL_VERSION,
        "token": token,
        "cwd": cwd,
        "argv": list(args.command),
        "gpus": args.gpus,
        "time_minutes": args.time,
        "env": env,
    }
    if args.timeout_seconds is not None:
        body["timeout_seconds"] = args.timeout_seconds
    if args.profile is not None:
        body["profile"] = args.profile
    return json.dumps(body, separators=(",", ":")).encode("utf-8") + b"\n"


class Captures:
    """Capture files as they arrive: written to NAME.part, renamed to NAME once their size and
    sha256 match what the broker recorded."""

    def __init__(self) -> None:
        self.open: dict[str, tuple[Any, Any]] = {}

    def add(self, name: str, data: bytes) -> None:
        if name not in self.open:
            self.open[name] = (open(name + ".part", "wb"), hashlib.sha256())  # noqa: SIM115
        handle, digest = self.open[name]
        handle.write(data)
        digest.update(data)

    def done(self, name: str, size: object, sha256: object) -> None:
        if name not in self.open:
            self.add(name, b"")  # an empty capture
        handle, digest = self.open.pop(name)
        written = handle.tell()
        handle.close()
        if written == size and digest.hexdigest() == sha256:
            os.replace(name + ".part", name)
            say(f"capture {name}: {written} bytes, sha256 {sha256}")
            return
        os.unlink(name + ".part")
        say(
            f"capture {name}: got {written} bytes sha256 {digest.hexdigest()}, the broker "
            f"recorded {size} bytes sha256 {sha256}; not kept"
        )

    def close(self) -> None:
        for name, (handle, _) in self.open.items():  # cut short: nothing half-written stays
            handle.close()
            with contextlib.suppress(OSError):
                os.unlink(name + ".part")
        self.open.clear()


CAPTURES = Captures()


def handle(reply: dict[str, Any]) -> int | None:
    """Act on one reply; the exit status when it ends the command."""
    kind = reply.get("type")
    if kind in ("capture", "captured"):
        name = reply.get("name")
        if not isinstance(name, str) or not CAPTURE_NAME.fullmatch(name):
            say(f"the broker sent a capture with an unusable name: {str(name)[:80]}")
            return EXIT_LOST
        if kind == "capture":
            CAPTURES.add(name, base64.b64decode(reply.get("data", "")))
        else:
            CAPTURES.done(name, reply.get("size"), reply.get("sha256"))
        return None
    if kind == "output":
        stream = sys.stdout if reply.get("stream") == "stdout" else sys.stderr
        stream.buffer.write(base64.b64decode(reply.get("data", "")))
        stream.buffer.flush()
        return None
    if kind == "waiting":
        say(str(reply.get("message", "waiting for a free slot")))
        return None
    if kind == "exit" and type(reply.get("status")) is int:
        return int(reply["status"])
    if kind == "refused":
        say(f"refused: {reply.get('message', '')}")
        return EXIT_REFUSED
    say(f"unexpected reply from the broker: {str(reply)[:200]}")
    return EXIT_LOST


def say(message: str) -> None:
    sys.stderr.write(f"vibesys-gpu: {message}\n" if not message.startswith("[") else message + "\n")
    sys.stderr.flush()


def converse(conn: socket.socket, line: bytes) -> int:
    # Refused before the whole request arrived? The reason is still there to be read.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        conn.sendall(line)
    buffer = b""
    while True:
        data = conn.recv(65536)
        if not data:
            say("lost the connection to the broker before the command ended")
            return EXIT_LOST
        buffer += data
        while b"\n" in buffer:
            raw, buffer = buffer.split(b"\n", 1)
            try:
                reply = json.loads(raw)
            except ValueError:
                say("the broker sent a malformed reply")
                return EXIT_LOST
            if not isinstance(reply, dict) or reply.get("version") != PROTOCOL_VERSION:
                say(f"the broker speaks another protocol version ({str(raw)[:80]})")
                return EXIT_LOST
            status = handle(reply)
            if status is not None:
                return status
        if len(buffer) > MAX_REPLY_BYTES:
            say("the broker sent an oversized reply")
            return EXIT_LOST


def _interrupt(signum: int, _frame: object) -> NoReturn:
    raise Interrupted(signum)


def main(argv: list[str] | None = None) -> NoReturn:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    path = args.socket or os.environ.get(SOCKET_ENV)
    token = os.environ.get(TOKEN_ENV)
    if not path or not token:
        say(f"${SOCKET_ENV} and ${TOKEN_ENV} must be set (the run did not enable GPU commands)")
        sys.exit(EXIT_REFUSED)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupt)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            conn.connect(path)
        except OSError as exc:
            say(f"cannot reach the broker at {path}: {exc.strerror or exc}")
            sys.exit(EXIT_REFUSED)
        status = converse(conn, call_line(args, token, os.getcwd()))
    except Interrupted:
        say("interrupted: the job is cancelled")
        status = EXIT_INTERRUPTED
    except BrokenPipeError:
        status = 128 + signal.SIGPIPE  # our reader left: stop the job, like SIGPIPE would
    except OSError as exc:
        say(f"lost the connection to the broker: {exc.strerror or exc}")
        status = EXIT_LOST
    finally:
        # Closing the connection is what tells the broker to stop the command.
        conn.close()
        CAPTURES.close()
    sys.exit(status)


if __name__ == "__main__":
    main()
