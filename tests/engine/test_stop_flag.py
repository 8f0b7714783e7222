"""The interrupt flag is set from signal handlers, so it must never take a lock: with
threading.Event, a SIGINT landing while the main thread sat inside Event.wait() deadlocked
`vibesys run` for good (seen once in CI). The properties are what `wait` returns and that it
returns at all; the bounds are hang guards, not speed targets."""

from __future__ import annotations

import signal
import threading
import time

from tests.helpers.hang_guard import hang_guard
from vibesys.engine.drive import StopFlag


def test_wait_returns_true_once_set_from_another_thread() -> None:
    flag = StopFlag()
    threading.Timer(0.05, flag.set).start()
    with hang_guard(30, "a wait woken from another thread"):
        assert flag.wait(60) is True


def test_wait_returns_false_only_after_its_timeout() -> None:
    flag = StopFlag()
    started = time.monotonic()
    with hang_guard(30, "a wait of 0.1 s"):
        assert flag.wait(0.1) is False
    assert time.monotonic() - started >= 0.1, "it waited out its timeout"
    flag.set()
    assert flag.wait(0) is True and flag.is_set()


def test_set_from_a_signal_handler_during_wait_never_deadlocks() -> None:
    previous = signal.getsignal(signal.SIGALRM)
    try:
        for round_number in range(40):
            flag = StopFlag()
            signal.signal(signal.SIGALRM, lambda _signum, _frame, f=flag: f.set())
            # Fire at varying points inside wait(), including inside its own bookkeeping.
            signal.setitimer(signal.ITIMER_REAL, 0.0005 + (round_number % 10) * 0.0003)
            with hang_guard(30, f"round {round_number}: a wait interrupted by a signal"):
                assert flag.wait(60) is True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
