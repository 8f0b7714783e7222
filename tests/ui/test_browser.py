"""`vibesys ui` in a real browser: Debian's chromium, driven by chromedriver through Selenium,
against the real server and jobs run by `vibesys run`. One browser session checks it all: the
list shows a finished and a running job and a new one appears live; filters work; the running
job's new output lines and its end (DONE) arrive on its page without a reload; the browser
logs no error; without the token the page is refused. Screenshots of the list and of the
invocation's page go to $VIBESYS_UI_SCREENSHOTS (default: the test's tmp directory)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.hang_guard import wait_until
from tests.helpers.ui import Server, on_page, run_job, start_stepped, text_of


def is_live(driver: Any) -> bool:
    return bool(
        driver.execute_script("return document.getElementById('live').className == 'live on'")
    )


def screenshot(driver: Any, name: str, directory: Path, capsys: pytest.CaptureFixture[str]) -> None:
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(max(int(height) + 40, 600), 4000))
    path = directory / name
    driver.save_screenshot(str(path))
    driver.set_window_size(1280, 900)
    with capsys.disabled():
        print(f"\nscreenshot: {path}", file=sys.stderr)


def test_the_ui_in_a_browser(
    tmp_path: Path,
    browser: Any,
    serve_ui: Callable[..., Server],
    capsys: pytest.CaptureFixture[str],
) -> None:
    from selenium.webdriver.common.by import By

    shots = Path(os.environ.get("VIBESYS_UI_SCREENSHOTS") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    project = tmp_path / "project"
    project.mkdir()
    finished = run_job(project, "finished", "python3", "-c", "print('all done')")
    running = start_stepped(project)
    try:
        running_id = running.invocation_id()
        server = serve_ui(running.journal)
        driver = browser

        def rows() -> dict[str, str]:  # in one script: a live update may replace them
            found = driver.execute_script(
                "return Array.from(document.querySelectorAll('#rows tr[data-id]'))"
                ".map(r => [r.dataset.id, r.dataset.state])"
            )
            return dict(found)

        # The list: a finished and a running job.
        driver.get(server.url)
        assert rows() == {finished: "DONE", running_id: "RUNNING"}
        assert "finished" in text_of(driver, "rows")
        wait_until(
            on_page(lambda: "on" in driver.find_element(By.ID, "live").get_attribute("class")),
            20,
            "the list is live",
            interval=0.1,
        )

        # A job started now appears in the open list without a reload.
        driver.execute_script("window.notReloaded = true")
        late = run_job(project, "late", "true")
        wait_until(
            on_page(lambda: rows().get(late) == "DONE"), 20, "the new job appears", interval=0.1
        )
        assert driver.execute_script("return window.notReloaded") is True
        screenshot(driver, "list.png", shots, capsys)

        # Filters, through the form (no script needed): state, then part of a label.
        from selenium.webdriver.support.ui import Select

        Select(driver.find_element(By.NAME, "state")).select_by_value("RUNNING")
        driver.find_element(By.CSS_SELECTOR, "form.filters button").click()
        wait_until(
            on_page(lambda: rows() == {running_id: "RUNNING"}),
            20,
            "the state filter applies",
            interval=0.1,
        )
        assert "state=RUNNING" in driver.current_url
        driver.get(f"{server.base}/?token={server.token}&label=fini")
        assert rows() == {finished: "DONE"}

        # The running job's page: its output follows live, then its end.
        driver.get(f"{server.base}/inv/{running_id}?token={server.token}")
        stdout = driver.find_element(By.ID, "log-stdout")
        assert "first line" in stdout.text
        assert text_of(driver, "state") == "RUNNING"
        wait_until(
            on_page(lambda: "on" in driver.find_element(By.ID, "live").get_attribute("class")),
            20,
            "the page is live",
            interval=0.1,
        )
        driver.execute_script("window.notReloaded = true")
        running.step(1)
        wait_until(
            on_page(lambda: "line after go1" in stdout.text),
            20,
            "the new line appears",
            interval=0.1,
        )
        assert text_of(driver, "state") == "RUNNING"
        running.step(2)
        wait_until(
            on_page(lambda: text_of(driver, "state") == "DONE"),
            20,
            "the state turns DONE",
            interval=0.1,
        )
        wait_until(
            on_page(lambda: "to stderr: done" in driver.find_element(By.ID, "log-stderr").text),
            20,
            "stderr arrives",
            interval=0.1,
        )
        wait_until(
            on_page(lambda: driver.find_element(By.ID, "live").text == "finished"),
            20,
            "the stream ends",
            interval=0.1,
        )
        assert driver.execute_script("return window.notReloaded") is True
        assert stdout.text.splitlines() == ["first line", "line after go1", "line after go2"]
        assert text_of(driver, "outcome") == "COMPLETED"
        assert driver.find_elements(By.CSS_SELECTOR, "#diagram g.state.current[data-state=DONE]")
        screenshot(driver, "invocation.png", shots, capsys)

        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []

        # Without the token: refused.
        driver.get(f"{server.base}/inv/{running_id}")
        assert "403" in driver.find_element(By.CLASS_NAME, "status").text
        assert "token" in driver.find_element(By.ID, "error-message").text
        assert running.process.wait(timeout=30) == 0
    finally:
        running.step(1)
        running.step(2)
        running.process.wait(timeout=30)
