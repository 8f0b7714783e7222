"""`vibesys ui` in chromium (see test_browser.py) on what a page must not claim: a `vibesys
run` SIGKILLed while its job runs on is "no process drives it" within seconds, not "live";
the durations and the timeline of a running job move without a reload; a job writing fast
keeps the page's log pane within a page load's tail, and once it is DONE the page has its
last bytes and ends within seconds instead of trickling old output."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.hang_guard import wait_until
from tests.helpers.ui import Server, on_page, run_job, text_of, vibesys
from vibesys.ui.logs import TAIL_BYTES

#: Once the file `go` appears (the page is live by then), about 1 MB/s of numbered lines for
#: 6 s, then a last line.
FAST_WRITER = textwrap.dedent(
    """
    import os, sys, time
    while not os.path.exists("go"):
        time.sleep(0.05)
    line = "x" * 90
    end = time.monotonic() + 6
    n = 0
    while time.monotonic() < end:
        for _ in range(1000):
            n += 1
            sys.stdout.write(f"{n:08d} {line}\\n")
        sys.stdout.flush()
        time.sleep(0.1)
    print("the very last line", flush=True)
    """
)


#: How long the fast writer's run may take to end (it takes about 8 s; a loaded machine slows it
#: down) and how soon after the journal says DONE the page must say so too.
RUN_END_SECONDS = 120
PAGE_LAG = 20


def journal_state(journal: Path, inv: str) -> str:
    conn = sqlite3.connect(f"file:{journal}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT state FROM invocations WHERE id=?", (inv,)).fetchone()
    finally:
        conn.close()
    return str(row[0]) if row else "(no row)"


def start_run(cwd: Path, label: str, *command: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        vibesys("run", "--name", label, "--", *command),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def running_row(journal: Path, label: str) -> tuple[str, str]:
    """(id, job id) of the invocation labelled `label`, once it is RUNNING."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if journal.exists():
            conn = sqlite3.connect(f"file:{journal}?mode=ro", uri=True)
            try:
                row = conn.execute(
                    "SELECT i.id, a.job_id FROM invocations i JOIN attempts a ON "
                    "a.invocation_id = i.id AND a.attempt = i.attempt "
                    "WHERE i.label=? AND i.state='RUNNING'",
                    (label,),
                ).fetchone()
            except sqlite3.Error:
                row = None
            finally:
                conn.close()
            if row and row[1]:
                return str(row[0]), str(row[1])
        time.sleep(0.05)
    raise AssertionError(f"{label} never ran")


def kill_job(job_id: str) -> None:
    with contextlib.suppress(ProcessLookupError, ValueError):
        os.killpg(os.getpgid(int(job_id)), signal.SIGKILL)


def test_a_killed_driver_is_not_live_and_times_move(
    tmp_path: Path, browser: Any, serve_ui: Callable[..., Server]
) -> None:
    driver = browser
    project = tmp_path / "project"
    project.mkdir()
    run_job(project, "first", "true")  # the journal exists before the server starts
    run = start_run(project, "held", "sleep", "30")
    job = ""
    try:
        inv, job = running_row(project / ".vibesys" / "journal.db", "held")
        server = serve_ui(project / ".vibesys" / "journal.db")
        driver.get(f"{server.base}/inv/{inv}?token={server.token}")
        wait_until(
            on_page(lambda: text_of(driver, "live") == "live"), 20, "the page is live", interval=0.1
        )
        assert (
            driver.execute_script("return document.getElementById('driver').dataset.driven")
            == "yes"
        )

        # The durations and the timeline move while it runs, without a reload.
        driver.execute_script("window.notReloaded = true")
        elapsed = text_of(driver, "elapsed")
        timeline = driver.execute_script("return document.getElementById('timeline').innerHTML")
        time.sleep(2.5)
        assert text_of(driver, "elapsed") != elapsed
        assert (
            driver.execute_script("return document.getElementById('timeline').innerHTML")
            != timeline
        )

        # SIGKILL the `vibesys run` that drives it: the job runs on, nothing drives it.
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=10)
        killed = time.monotonic()
        wait_until(
            on_page(lambda: "no process drives it" in text_of(driver, "driver")),
            10,
            "the page says no process drives it",
            interval=0.1,
        )
        assert time.monotonic() - killed < 30  # within the lease it held (30 s)
        assert text_of(driver, "live") == "not driven"
        assert "vibesys reconcile" in text_of(driver, "driver")
        assert text_of(driver, "state") == "RUNNING"
        assert driver.execute_script("return window.notReloaded") is True
        # A page loaded now says so from the start.
        driver.get(f"{server.base}/inv/{inv}?token={server.token}")
        assert "no process drives it" in text_of(driver, "driver")
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []
    finally:
        run.kill()
        run.wait(timeout=10)
        if job:
            kill_job(job)


@pytest.mark.timeout(60 + RUN_END_SECONDS)
def test_a_fast_writer_keeps_the_page_bounded(
    tmp_path: Path, browser: Any, serve_ui: Callable[..., Server]
) -> None:
    driver = browser
    project = tmp_path / "project"
    project.mkdir()
    run_job(project, "first", "true")
    run = start_run(project, "fast", "python3", "-c", FAST_WRITER)
    job = ""
    try:
        journal = project / ".vibesys" / "journal.db"
        inv, job = running_row(journal, "fast")
        server = serve_ui(journal)
        driver.get(f"{server.base}/inv/{inv}?token={server.token}")
        wait_until(
            on_page(lambda: "on" in driver.find_element("id", "live").get_attribute("class")),
            20,
            "the page is live",
            interval=0.1,
        )
        (project / "go").touch()
        length = "return document.getElementById('log-stdout').textContent.length"
        lengths: list[int] = []
        journal_done_at = done_at = None
        # The page is judged against the moment the journal said DONE: on a loaded machine the
        # run itself may take long to end, which says nothing of the page.
        deadline = time.monotonic() + RUN_END_SECONDS
        while time.monotonic() < deadline:
            lengths.append(int(driver.execute_script(length)))
            if journal_done_at is None and journal_state(journal, inv) == "DONE":
                journal_done_at = time.monotonic()
            if done_at is None and text_of(driver, "state") == "DONE":
                done_at = time.monotonic()
            if text_of(driver, "live") == "finished":
                break
            if journal_done_at is not None and time.monotonic() - journal_done_at > PAGE_LAG:
                break
            time.sleep(0.2)
        finished_at = time.monotonic()
        states = f"journal: {journal_state(journal, inv)}, page: {text_of(driver, 'state')}"
        assert journal_done_at is not None, f"the run did not end in {RUN_END_SECONDS} s ({states})"
        assert done_at is not None, f"the page not DONE {PAGE_LAG} s after the journal ({states})"
        assert done_at - journal_done_at < PAGE_LAG, f"the page turned DONE late ({states})"
        assert max(lengths) <= TAIL_BYTES, max(lengths)
        assert max(lengths) > TAIL_BYTES // 2  # it did fill up (the test can fail)
        assert finished_at - done_at < 5, "old output kept trickling after DONE"
        shown = str(
            driver.execute_script("return document.getElementById('log-stdout').textContent")
        )
        assert shown.endswith("the very last line\n")
        note = text_of(driver, "log-note-stdout")
        assert "only the end is shown" in note and "behind" not in note
        assert run.wait(timeout=30) == 0
    finally:
        run.kill()
        run.wait(timeout=10)
        if job:
            kill_job(job)
