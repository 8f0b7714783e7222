"""The UI tests' fixtures: a `vibesys ui` server run as a user runs it, and Debian's chromium
driven by chromedriver through Selenium for the browser tests (helpers: tests/helpers/ui.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from tests.helpers.ui import Server, vibesys


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
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'chromium'}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()
