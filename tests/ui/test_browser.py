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

from tests.ui.conftest import Server, run_job, start_stepped, text_of, wait_for


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
        wait_for(
            driver,
            "the list is live",
            lambda: "on" in driver.find_element(By.ID, "live").get_attribute("class"),
        )

        # A job started now appears in the open list without a reload.
        driver.execute_script("window.notReloaded = true")
        late = run_job(project, "late", "true")
        wait_for(driver, "the new job appears", lambda: rows().get(late) == "DONE")
        assert driver.execute_script("return window.notReloaded") is True
        screenshot(driver, "list.png", shots, capsys)

        # Filters, through the form (no script needed): state, then part of a label.
        from selenium.webdriver.support.ui import Select

        Select(driver.find_element(By.NAME, "state")).select_by_value("RUNNING")
        driver.find_element(By.CSS_SELECTOR, "form.filters button").click()
        wait_for(driver, "the state filter applies", lambda: rows() == {running_id: "RUNNING"})
        assert "state=RUNNING" in driver.current_url
        driver.get(f"{server.base}/?token={server.token}&label=fini")
        assert rows() == {finished: "DONE"}

        # The running job's page: its output follows live, then its end.
        driver.get(f"{server.base}/inv/{running_id}?token={server.token}")
        stdout = driver.find_element(By.ID, "log-stdout")
        assert "first line" in stdout.text
        assert text_of(driver, "state") == "RUNNING"
        wait_for(
            driver,
            "the page is live",
            lambda: "on" in driver.find_element(By.ID, "live").get_attribute("class"),
        )
        driver.execute_script("window.notReloaded = true")
        running.step(1)
        wait_for(driver, "the new line appears", lambda: "line after go1" in stdout.text)
        assert text_of(driver, "state") == "RUNNING"
        running.step(2)
        wait_for(
            driver,
            "the state turns DONE",
            lambda: text_of(driver, "state") == "DONE",
        )
        wait_for(
            driver,
            "stderr arrives",
            lambda: "to stderr: done" in driver.find_element(By.ID, "log-stderr").text,
        )
        wait_for(
            driver, "the stream ends", lambda: driver.find_element(By.ID, "live").text == "finished"
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
