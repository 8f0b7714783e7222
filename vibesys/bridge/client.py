#!/usr/bin/env python3
"""vibesys-eval: run one trusted evaluation where the session's operator says, through the
host's evaluation bridge, and get its result.

    vibesys-eval [--kind accuracy|benchmark|profile] [--profiler NAME] [--timeout SECONDS]
                 [--artifact GLOB]... [--env NAME]... [--result FILE] -- COMMAND [ARGS...]
    vibesys-eval capabilities [--notes]

The command runs on the session's site (a Slurm cluster, a SkyPilot cluster, or the host) in a
fresh copy of the workspace's candidate; nothing it changes comes back into the workspace. Its
output streams back as it is produced; the result (a JobResult, JSON) is written to FILE, or else
as the last line of stdout; the exit status is the command's own. Declared artifacts (relative
globs) are brought home and copied to the session's results directory, as are a profile's captures.

A lost connection (a restarted bridge), a busy bridge (every connection it serves at once is taken)
and a silent one (no heartbeat for three of its periods: a stopped or hung bridge) are retried with
the same request id, for --retry-seconds since the last reply; a retry reattaches to the same
evaluation from the output already received: it never starts a second one. Give --request-id to
reattach after this client itself was restarted. The first Ctrl-C (SIGINT, SIGTERM, SIGHUP) cancels
the evaluation and waits for it to settle; a second one leaves.

The bridge is found through $VIBESYS_EVAL_SOCKET with the session's token in $VIBESYS_EVAL_TOKEN,
the campaign in $VIBESYS_EVAL_RUN and the workspace in $VIBESYS_EVAL_WORKSPACE. Exit statuses
besides the command's: 2 refused (the reason is printed), 4 unresolved, 75 infrastructure failures
spent the retries, 78 misconfigured (a person must act), 124 timed out, 130 cancelled or
interrupted, 255 the bridge could not be reached, stayed busy or stayed silent for --retry-seconds.

Standard library only: any image's python3 runs it (`vibesys-eval`, or `python3 $VIBESYS_EVAL`).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import signal
import socket
import sys
import time
import uuid
from typing import Any, NoReturn

PROTOCOL_VERSION = 1
SOCKET_ENV = "VIBESYS_EVAL_SOCKET"
TOKEN_ENV = "VIBESYS_EVAL_TOKEN"
RUN_ENV = "VIBESYS_EVAL_RUN"
WORKSPACE_ENV = "VIBESYS_EVAL_WORKSPACE"
#: A result carries its artifacts' list; anything far larger is not our bridge talking.
MAX_REPLY_BYTES = 1 << 24

EXIT_REFUSED = 2
EXIT_INTERRUPTED = 130
EXIT_LOST = 255
#: Reconnect delays (seconds): doubling from the first, at most the last.
BACKOFF = (0.2, 5.0)
#: The heartbeat until the bridge says its own (`accepted`); silence for 3 of them is a loss.
HEARTBEAT_SECONDS, SILENT_BEATS = 5.0, 3


class Interrupted(Exception):
    pass


class Lost(Exception):
    """The connection ended before the result: try again, same request id."""


class Busy(Lost):
    """The bridge serves all the connections it can: try again after `retry_after` s."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="vibesys-eval",
        description="Run a trusted evaluation through the session's bridge; "
        "`vibesys-eval capabilities [--notes]` prints what the session offers (or its notes).",
        epilog="Example: vibesys-eval --kind benchmark --artifact 'out/*.json' -- python b.py",
    )
    parser.add_argument("--kind", choices=("accuracy", "benchmark", "profile"), default="accuracy")
    parser.add_argument("--profiler", metavar="NAME", help="a profile's profiler (capabilities)")
    parser.add_argument(
        "--timeout",
        type=int,
        metavar="SECONDS",
        help="the evaluation's time limit (default: the session's)",
    )
    parser.add_argument(
        "--artifact",
        action="append",
        default=[],
        metavar="GLOB",
        help="a file or glob the evaluation leaves, relative to the workspace (repeatable)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME",
        help="pass this variable's value from here (only names the operator allows)",
    )
    parser.add_argument("--result", metavar="FILE", help="write the JobResult here")
    parser.add_argument("--request-id", help="the idempotency key (default: a new one)")
    parser.add_argument(
        "--retry-seconds",
        type=float,
        default=120.0,
        help="how long a lost, busy or silent bridge is tried again (default 120)",
    )
    parser.add_argument("--socket", default=None, help=f"the bridge (default: ${SOCKET_ENV})")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("no command given; usage: vibesys-eval [options] -- COMMAND")
    if (args.kind == "profile") != (args.profiler is not None):
        parser.error("--kind profile and --profiler NAME go together")
    return args


def say(message: str) -> None:
    sys.stderr.write(message if message.startswith("[") else f"vibesys-eval: {message}")
    sys.stderr.write("\n")
    sys.stderr.flush()


def connect(path: str, timeout: float = HEARTBEAT_SECONDS * SILENT_BEATS) -> socket.socket:
    """Every wait (the connect, each read) ends after `timeout`: a stopped bridge is lost."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout)
    try:
        conn.connect(path)
    except OSError:
        conn.close()
        raise
    return conn


def replies(conn: socket.socket, line: bytes) -> Any:
    """Send `line`, then yield each reply (a dict) until the bridge closes."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        conn.sendall(line)  # refused before it all arrived? the reason is still there
    buffer = b""
    while True:
        data = conn.recv(65536)
        if not data:
            return
        buffer += data
        while b"\n" in buffer:
            raw, buffer = buffer.split(b"\n", 1)
            reply = json.loads(raw)
            if not isinstance(reply, dict) or reply.get("version") != PROTOCOL_VERSION:
                raise ValueError(f"the bridge speaks another protocol ({str(raw)[:80]})")
            yield reply
        if len(buffer) > MAX_REPLY_BYTES:
            raise ValueError("the bridge sent an oversized reply")


def seconds(value: Any, most: float) -> float | None:
    """A duration the bridge sent, if it is one (a positive number up to `most`)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= most:
        return float(value)
    return None


def line_of(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode("utf-8") + b"\n"


class Evaluation:
    """One request, and how far its output has come."""

    def __init__(self, args: argparse.Namespace, token: str, env: dict[str, str]) -> None:
        self.args = args
        self.body = {
            "version": PROTOCOL_VERSION,
            "op": "evaluate",
            "token": token,
            "request_id": args.request_id or uuid.uuid4().hex,
            "run": os.environ.get(RUN_ENV, ""),
            "workspace": os.environ.get(WORKSPACE_ENV) or os.getcwd(),
            "kind": args.kind,
            "argv": list(args.command),
            "timeout_seconds": args.timeout,
            "env": env,
            "artifacts": list(args.artifact),
            "profiler": args.profiler,
        }
        self.attempt = 0
        self.offsets = {"stdout": 0, "stderr": 0}
        self.last_byte = b"\n"
        self.said: set[str] = set()
        self.heard = False
        self.heartbeat = HEARTBEAT_SECONDS

    def evaluate_line(self) -> bytes:
        resume = {"attempt": self.attempt, **self.offsets}
        return line_of({**self.body, "resume": resume})

    def cancel(self) -> bytes:
        keys = ("version", "token", "request_id", "run", "workspace")
        return line_of({**{k: self.body[k] for k in keys}, "op": "cancel"})

    def silence(self) -> float:
        """How long the bridge may say nothing (not even a heartbeat) before it is lost."""
        return max(self.heartbeat * SILENT_BEATS, 0.5)

    def handle(self, reply: dict[str, Any]) -> dict[str, Any] | None:
        """Act on one reply; the result reply when it ends the conversation."""
        kind = reply.get("type")
        if kind == "busy":  # not served: the loss goes on
            wait = seconds(reply.get("retry_after"), 60.0) or 1.0
            raise Busy(str(reply.get("message", "the bridge is busy")), wait)
        self.heard = True
        if kind == "output":
            self.output(reply)
        elif kind == "accepted":
            self.heartbeat = seconds(reply.get("heartbeat_seconds"), 3600.0) or self.heartbeat
            self.once(f"[vibesys-eval] accepted: invocation {reply.get('invocation')}")
        elif (kind == "queued" and reply.get("position")) or kind in ("stopping", "cancelling"):
            self.once(str(reply.get("message", "")))
        elif kind == "started":
            where = reply.get("cluster") or "this host"
            self.once(
                f"[vibesys-eval] started: attempt {reply.get('attempt')} on {where}, "
                f"job {reply.get('job_id') or '-'}"
            )
        elif kind in ("result", "refused"):
            return reply
        return None

    def once(self, message: str) -> None:
        if message and message not in self.said:
            self.said.add(message)
            say(message)

    def output(self, reply: dict[str, Any]) -> None:
        attempt, stream = int(reply["attempt"]), str(reply["stream"])
        if attempt != self.attempt:
            if self.attempt:
                say(f"[vibesys-eval] attempt {attempt} starts over (attempt {self.attempt} lost)")
            self.attempt, self.offsets = attempt, {"stdout": 0, "stderr": 0}
        data = base64.b64decode(reply["data"])
        offset = int(reply["offset"])
        have = self.offsets[stream]
        if offset + len(data) <= have:
            return  # seen already
        data = data[max(have - offset, 0) :]
        target = sys.stdout if stream == "stdout" else sys.stderr
        target.buffer.write(data)
        target.buffer.flush()
        self.offsets[stream] = max(have, offset) + len(data)
        if stream == "stdout" and data:
            self.last_byte = data[-1:]


def converse(evaluation: Evaluation, path: str) -> dict[str, Any]:
    """The result (or refusal) reply; Lost when the connection ended before it."""
    try:
        conn = connect(path, evaluation.silence())
    except OSError as exc:
        raise Lost(f"cannot reach the bridge at {path}: {exc.strerror or exc}") from None
    try:
        for reply in replies(conn, evaluation.evaluate_line()):
            final = evaluation.handle(reply)
            if final is not None:
                return final
            conn.settimeout(evaluation.silence())  # the bridge's own heartbeat, once told
    except TimeoutError:  # socket.timeout, the read's
        raise Lost(
            f"no word from the bridge for {evaluation.silence():g} s "
            f"(its heartbeat comes every {evaluation.heartbeat:g} s)"
        ) from None
    except ConnectionError as exc:
        raise Lost(f"lost the connection to the bridge: {exc.strerror or exc}") from None
    finally:
        conn.close()
    raise Lost("the bridge closed the connection before the result")


def send_cancel(evaluation: Evaluation, path: str) -> None:
    try:
        conn = connect(path)
        with conn:
            for reply in replies(conn, evaluation.cancel()):
                say(str(reply.get("message", "")))
                break
    except (OSError, ValueError) as exc:
        say(f"the cancel did not reach the bridge ({exc}); retrying the result")


def evaluate(evaluation: Evaluation, path: str, budget: float) -> dict[str, Any]:
    """The final reply, reconnecting with the same request id while the budget lasts."""
    delay, cancelled = 0.0, False
    lost_since: float | None = None
    while True:
        try:
            time.sleep(delay)
            return converse(evaluation, path)
        except Interrupted:
            if cancelled:
                raise
            cancelled, delay = True, 0.0
            say("[vibesys-eval] interrupted: cancelling the evaluation (again to leave now)")
            send_cancel(evaluation, path)
        except Lost as exc:
            now = time.monotonic()
            if evaluation.heard:  # the last connection got somewhere: a new loss
                evaluation.heard, lost_since, delay = False, None, 0.0
            lost_since = lost_since or now
            left = budget - (now - lost_since)
            if left <= 0:
                raise
            if isinstance(exc, Busy):
                evaluation.once(f"[vibesys-eval] {exc} (in {exc.retry_after:g} s)")
                delay = min(exc.retry_after, left)
                continue
            evaluation.once(f"[vibesys-eval] {exc}; trying again with the same request id")
            delay = min(max(delay * 2, BACKOFF[0]), BACKOFF[1], left)


def write_result(result: dict[str, Any], target: str | None, last_byte: bytes) -> None:
    text = json.dumps(result, sort_keys=True)
    if target is None:
        sys.stdout.write(("" if last_byte == b"\n" else "\n") + text + "\n")
        sys.stdout.flush()
        return
    temporary = f"{target}.tmp.{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text + "\n")
    os.replace(temporary, target)


def capabilities(path: str, token: str, notes: bool) -> int:
    body = {"version": PROTOCOL_VERSION, "op": "capabilities", "token": token}
    try:
        with connect(path) as conn:
            for reply in replies(conn, line_of(body)):
                if reply.get("type") == "capabilities" and (reply.get("notes") or not notes):
                    shown = json.dumps(reply.get("capabilities"), indent=2, sort_keys=True)
                    print(reply["notes"] if notes else shown, end="" if notes else "\n")
                    return 0
                if reply.get("type") == "busy":
                    say(str(reply.get("message", "the bridge is busy")))
                    return EXIT_LOST
                say(f"refused: {reply.get('message', 'this bridge renders no notes')}")
                return EXIT_REFUSED
    except (OSError, ValueError) as exc:
        say(f"cannot reach the bridge at {path}: {exc}")
    return EXIT_LOST


def _interrupt(signum: int, _frame: object) -> NoReturn:
    raise Interrupted(signum)


def main(argv: list[str] | None = None) -> NoReturn:
    words = sys.argv[1:] if argv is None else argv
    path = os.environ.get(SOCKET_ENV)
    token = os.environ.get(TOKEN_ENV)
    args = None if words in (["capabilities"], ["capabilities", "--notes"]) else parse_args(words)
    path = (args and args.socket) or path
    if not path or not token:
        say(f"${SOCKET_ENV} and ${TOKEN_ENV} must be set (no evaluation session)")
        sys.exit(EXIT_REFUSED)
    if args is None:
        sys.exit(capabilities(path, token, "--notes" in words))
    missing = [name for name in args.env if name not in os.environ]
    if missing:
        say(f"refused: --env {missing[0]}: not set here")
        sys.exit(EXIT_REFUSED)
    evaluation = Evaluation(args, token, {name: os.environ[name] for name in args.env})
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupt)
    try:
        final = evaluate(evaluation, path, args.retry_seconds)
    except Interrupted:
        say("interrupted: left before the evaluation settled")
        sys.exit(EXIT_INTERRUPTED)
    except Lost as exc:
        say(f"{exc}; gave up after {args.retry_seconds:g} s")
        sys.exit(EXIT_LOST)
    except ValueError as exc:
        say(str(exc))
        sys.exit(EXIT_LOST)
    if final.get("type") == "refused":
        say(f"refused: {final.get('message', '')}")
        sys.exit(EXIT_REFUSED)
    write_result(final["result"], args.result, evaluation.last_byte)
    sys.exit(int(final.get("exit_status", 1)))


if __name__ == "__main__":
    main()
