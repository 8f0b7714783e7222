"""Through the bridge (`session serve --local` and `vibesys-eval`), nothing of an evaluation
outlives it: not at its timeout, not at its own end, not at the session's teardown, however its
processes detached themselves (setsid, a double fork, a stopped process)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bridge.session_helpers import BUDGET, HOST_VIEW, result_line, start_session
from tests.helpers.escapees import Escapees, escapees

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def leftovers() -> Iterator[Escapees]:
    made = escapees()
    yield made
    made.kill_any_left()


@pytest.mark.parametrize("view", [(), HOST_VIEW], ids=["confined", "host-view"])
def test_a_timeout_leaves_nothing_running(
    tmp_path: Path, leftovers: Escapees, view: tuple[str, ...]
) -> None:
    session = start_session(tmp_path, extra=view)
    try:
        helper = session.helper("--timeout", "3", "--", "sh", "-c", leftovers.script("sleep 100"))
        leftovers.wait_started()
        out, err = helper.communicate(timeout=BUDGET)
        assert helper.returncode == 124, err
        assert result_line(out)["status"] == "TIMEOUT"
        leftovers.assert_gone()  # the result says the evaluation ended: nothing of it runs
    finally:
        session.stop()


def test_an_end_leaves_nothing_running(tmp_path: Path, leftovers: Escapees) -> None:
    # The host's view, so that the job sees the file that lets it end (a confined one has a
    # private /tmp); the wrapper's reaping is the same either way.
    session = start_session(tmp_path, extra=HOST_VIEW)
    try:
        go = tmp_path / "go"
        wait = f"while [ ! -e {go} ]; do sleep 0.05; done"
        helper = session.helper("--", "sh", "-c", leftovers.script(wait))
        leftovers.wait_started()
        go.touch()
        out, err = helper.communicate(timeout=BUDGET)
        assert helper.returncode == 0, err
        assert result_line(out)["status"] == "COMPLETED"
        leftovers.assert_gone()
    finally:
        session.stop()


def test_a_teardown_leaves_nothing_running(tmp_path: Path, leftovers: Escapees) -> None:
    session = start_session(tmp_path)
    helper = session.helper("--", "sh", "-c", leftovers.script("sleep 100"))
    leftovers.wait_started()
    status, err = session.stop(signal.SIGTERM)
    assert status == 0, err
    out, _ = helper.communicate(timeout=BUDGET)
    assert result_line(out)["status"] == "CANCELLED"
    leftovers.assert_gone()  # the session's exit 0 says every evaluation settled
