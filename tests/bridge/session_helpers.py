"""`vibesys session serve` and `vibesys-eval` as real processes, the way a framework runs them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vibesys.bridge import client

CLIENT = Path(client.__file__)
BUDGET = 60.0
#: For tests whose commands leave markers on the host, outside their copy of the candidate: what
#: an operator who wants that says (`--local` alone confines every evaluation to its copy).
HOST_VIEW = ("--unconfined",)


@dataclass
class Session:
    process: subprocess.Popen[str]
    document: dict[str, Any]
    root: Path

    @property
    def env(self) -> dict[str, str]:
        environment: dict[str, str] = self.document["environment"]
        return environment

    def helper(self, *args: str, **extra: str) -> subprocess.Popen[str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("VIBESYS_")}
        return subprocess.Popen(
            [sys.executable, str(CLIENT), *args],
            cwd=self.document["workspace"],
            env=base | self.env | extra,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def evaluate(self, *args: str, **extra: str) -> tuple[int, str, str]:
        proc = self.helper(*args, **extra)
        out, err = proc.communicate(timeout=BUDGET)
        return proc.returncode, out, err

    def reap(self) -> tuple[int, str]:
        """The status of a session that ended by itself (or was killed), and its stderr."""
        _, err = self.process.communicate(timeout=BUDGET)
        return self.process.returncode, err

    def stop(self, signum: int = signal.SIGTERM) -> tuple[int, str]:
        if self.process.poll() is None:
            self.process.send_signal(signum)
        _, err = self.process.communicate(timeout=BUDGET)
        return self.process.returncode, err


def serve_argv(root: Path, *site: str, extra: tuple[str, ...] = ()) -> list[str]:
    return [
        sys.executable,
        "-m",
        "vibesys",
        "session",
        "serve",
        "--run-id",
        "campaign-1",
        "--workspace",
        str(root / "ws"),
        "--journal",
        str(root / ".vibesys" / "journal.db"),
        "--state-dir",
        str(root / "state"),
        "--teardown-seconds",
        "30",
        *(site or ("--local",)),
        *extra,
    ]


def start_session(
    root: Path, *site: str, extra: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> Session:
    """Start a session and read its document (the JSON object it prints first)."""
    (root / "ws").mkdir(parents=True, exist_ok=True)
    full = {k: v for k, v in os.environ.items() if k != "VIBESYS_FAILPOINTS"} | (env or {})
    process = subprocess.Popen(
        serve_argv(root, *site, extra=extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=root,
        env=full,
    )
    assert process.stdout is not None
    lines = []
    while True:
        line = process.stdout.readline()
        if not line:
            _, err = process.communicate(timeout=BUDGET)
            raise AssertionError(f"session serve ended (rc={process.returncode}): {err}")
        lines.append(line)
        if line == "}\n":
            break
    return Session(process, json.loads("".join(lines)), root)


def result_line(out: str) -> dict[str, Any]:
    last = out.rstrip("\n").rsplit("\n", 1)[-1]
    parsed: dict[str, Any] = json.loads(last)
    return parsed
