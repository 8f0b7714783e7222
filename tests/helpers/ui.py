"""What the UI's tests share: a journal with real local invocations (made by `vibesys run`, as a
user makes them), a `vibesys ui` server run as a user runs it, and reading the browser's page."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

from tests.helpers.hang_guard import wait_until

#: A job that prints a line, then one more each time a file appears (go1, go2), then ends.
STEPPED_JOB = textwrap.dedent(
    """
    import os, sys, time
    print("first line", flush=True)
    for n in (1, 2):
        while not os.path.exists(f"go{n}"):
            time.sleep(0.05)
        print(f"line after go{n}", flush=True)
    print("to stderr: done", file=sys.stderr, flush=True)
    """
)


def vibesys(*args: str) -> list[str]:
    return [sys.executable, "-m", "vibesys", *args]


def run_job(cwd: Path, label: str, *command: str, status: int = 0) -> str:
    """Run `vibesys run --name LABEL -- COMMAND` to its end; the new invocation's id."""
    done = subprocess.run(
        vibesys("run", "--name", label, "--", *command),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == status, done.stderr
    return done.stderr.strip().splitlines()[-1].split()[1]  # "vibesys: ID DONE ..."


class Running(msgspec.Struct):
    """A `vibesys run` in the background, driving the stepped job."""

    process: subprocess.Popen[str]
    cwd: Path
    journal: Path

    def invocation_id(self) -> str:
        found = wait_until(self._running_id, 30, "the stepped job to run", interval=0.05)
        assert found is not None
        return found

    def _running_id(self) -> str | None:
        if not self.journal.exists():
            return None
        conn = sqlite3.connect(f"file:{self.journal}?mode=ro", uri=True)
        try:
            row = conn.execute(
                "SELECT id FROM invocations WHERE label='running' AND state='RUNNING'"
            ).fetchone()
        except sqlite3.Error:
            row = None
        finally:
            conn.close()
        return str(row[0]) if row else None

    def step(self, n: int) -> None:
        (self.cwd / f"go{n}").touch()


def start_stepped(cwd: Path) -> Running:
    process = subprocess.Popen(
        vibesys("run", "--name", "running", "--", "python3", "-c", STEPPED_JOB),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    return Running(process, cwd, cwd / ".vibesys" / "journal.db")


class Server(msgspec.Struct):
    process: subprocess.Popen[str]
    url: str

    @property
    def base(self) -> str:
        return self.url.split("/?", 1)[0]

    @property
    def token(self) -> str:
        return self.url.split("token=", 1)[1]


def on_page(check: Callable[[], Any]) -> Callable[[], Any]:
    """`check` for `wait_until`, false while the element it reads is not there yet or was
    replaced by a live update meanwhile."""

    def attempt() -> Any:
        try:
            return check()
        except (NoSuchElementException, StaleElementReferenceException):
            return False

    return attempt


def text_of(driver: Any, element_id: str) -> str:
    return str(driver.execute_script(f"return document.getElementById('{element_id}').innerText"))
