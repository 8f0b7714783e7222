"""What the UI's tests share: a journal with real local invocations (made by `vibesys run`, as a
user makes them), a `vibesys ui` server run as a user runs it, and Debian's chromium driven by
chromedriver through Selenium for the browser tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

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


@dataclass
class Running:
    """A `vibesys run` in the background, driving the stepped job."""

    process: subprocess.Popen[str]
    cwd: Path
    journal: Path

    def invocation_id(self) -> str:
        import sqlite3

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.journal.exists():
                conn = sqlite3.connect(f"file:{self.journal}?mode=ro", uri=True)
                try:
                    row = conn.execute(
                        "SELECT id FROM invocations WHERE label='running' AND state='RUNNING'"
                    ).fetchone()
                except sqlite3.Error:
                    row = None
                finally:
                    conn.close()
                if row:
                    return str(row[0])
            time.sleep(0.05)
        raise AssertionError("the stepped job never ran")

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


@dataclass
class Server:
    process: subprocess.Popen[str]
    url: str

    @property
    def base(self) -> str:
        return self.url.split("/?", 1)[0]

    @property
    def token(self) -> str:
        return self.url.split("token=", 1)[1]


@pytest.fixture
def serve_ui() -> Iterator[object]:
    """`serve_ui(journal)` starts `vibesys ui --journal JOURNAL` and returns its Server."""
    started: list[Server] = []

    def start(journal: Path, *extra: str) -> Server:
        process = subprocess.Popen(
            vibesys("ui", "--journal", str(journal), *extra),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line.startswith("http://127.0.0.1:"), (
            line,
            process.stderr and process.stderr.read(),
        )
        server = Server(process, line)
        started.append(server)
        return server

    yield start
    for server in started:
        server.process.terminate()
        try:
            server.process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.communicate()


CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
#: Chromium as root in a container without a network (see the machine notes): no sandbox, no
#: GPU, nothing of Google's services.
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--window-size=1280,900",
)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{', '.join(missing)} missing: scripts/test installs them")
        pytest.skip(
            f"{', '.join(missing)} not installed (apt-get install chromium chromium-driver)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'chromium'}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def wait_for(driver: Any, what: str, check: Callable[[], Any], timeout: float = 20) -> Any:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    def attempt(_: Any) -> Any:
        try:
            return check()
        except StaleElementReferenceException:  # replaced by a live update meanwhile
            return False

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.1).until(attempt)
    except Exception as exc:
        raise AssertionError(f"timed out waiting until {what}") from exc


def text_of(driver: Any, element_id: str) -> str:
    return str(driver.execute_script(f"return document.getElementById('{element_id}').innerText"))
