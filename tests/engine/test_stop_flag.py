"""The interrupt flag is set from signal handlers, so it must never take a lock: with
threading.Event, a SIGINT landing while the main thread sat inside Event.wait() deadlocked
`vibesys run` for good (seen once in CI)."""

from __future__ import annotations

import signal
import threading
import time

from vibesys.engine.drive import StopFlag


def test_wait_returns_once_set_from_another_thread() -> None:
    flag = StopFlag()
    threading.Timer(0.05, flag.set).start()
    started = time.monotonic()
    assert flag.wait(5) is True
    assert time.monotonic() - started < 1


def test_wait_times_out_when_nobody_sets_it() -> None:
    flag = StopFlag()
    started = time.monotonic()
    assert flag.wait(0.1) is False
    assert 0.09 <= time.monotonic() - started < 1


def test_set_from_a_signal_handler_during_wait_never_deadlocks() -> None:
    previous = signal.getsignal(signal.SIGALRM)
    try:
        for round_number in range(40):
            flag = StopFlag()
            signal.signal(signal.SIGALRM, lambda _signum, _frame, f=flag: f.set())
            # Fire at varying points inside wait(), including inside its own bookkeeping.
            signal.setitimer(signal.ITIMER_REAL, 0.0005 + (round_number % 10) * 0.0003)
            started = time.monotonic()
            assert flag.wait(2) is True
            assert time.monotonic() - started < 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
