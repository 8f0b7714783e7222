from __future__ import annotations

import faulthandler
import os
import signal
import sys
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from tests.helpers.time_limits import MARKER_TIMEOUTS, timeout_of
from vibesys.adapters.fake import FAKE_ENTRY
from vibesys.adapters.registry import register
from vibesys.journal_schema import Journal, open_journal

# The scripted fake adapter is an adapter like the others for the tests: one registry line.
register(FAKE_ENTRY)

#: pytest-timeout's signal method raises inside the test. A test that swallows that, or then
#: waits without a limit (a `with Popen(...)` block waits for its child on the way out), would
#: still hang: past its limit plus this grace (ini `hang_backstop_grace`), faulthandler dumps
#: every thread and exits the run.
HANG_BACKSTOP_GRACE = 60.0


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "hang_backstop_grace",
        "seconds past a test's timeout before the whole run is stopped with a stack dump",
        type="string",
        default=str(HANG_BACKSTOP_GRACE),
    )


def pytest_configure(config: pytest.Config) -> None:
    # A suite started in the background of a script (`scripts/test &`) inherits SIGINT and
    # SIGQUIT ignored, under `nohup` SIGHUP too, and so would every vibesys it starts: the
    # tests that interrupt one would find it keeping the caller's choice. They start from the
    # interactive default.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    for ignored in (signal.SIGQUIT, signal.SIGHUP):
        if signal.getsignal(ignored) == signal.SIG_IGN:
            signal.signal(ignored, signal.SIG_DFL)
    # The dump must reach the real stderr, not the capture of the test that hangs.
    config.stash[_BACKSTOP_FD] = os.dup(sys.__stderr__.fileno() if sys.__stderr__ else 2)


def pytest_unconfigure(config: pytest.Config) -> None:
    os.close(config.stash[_BACKSTOP_FD])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("timeout") is not None:
            continue
        limits = [s for name, s in MARKER_TIMEOUTS.items() if item.get_closest_marker(name)]
        if limits:
            item.add_marker(pytest.mark.timeout(max(limits)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    limit = timeout_of(item)
    if limit <= 0:
        return (yield)
    faulthandler.dump_traceback_later(
        limit + float(item.config.getini("hang_backstop_grace")),
        exit=True,
        file=item.config.stash[_BACKSTOP_FD],
    )
    try:
        return (yield)
    finally:
        faulthandler.cancel_dump_traceback_later()


_BACKSTOP_FD = pytest.StashKey[int]()


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    store = open_journal(tmp_path / "journal.db")
    yield store
    store.close()
