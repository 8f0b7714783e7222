"""The run's concurrency cap: never more than `cap` slots held, first come first served, and a
waiter that is stopped leaves without ever holding one."""

from __future__ import annotations

import threading

import pytest

from tests.helpers.hang_guard import wait_until
from vibesys.broker.replies import Waiting
from vibesys.broker.slots import JobSlots

BUDGET = 10.0


def test_no_cap_never_waits() -> None:
    slots = JobSlots(None)
    seen: list[Waiting] = []
    with (
        slots.slot(threading.Event(), seen.append) as a,
        slots.slot(threading.Event(), seen.append) as b,
    ):
        assert a and b and slots.active == 2
    assert seen == [] and slots.active == 0


def test_invalid_caps() -> None:
    with pytest.raises(ValueError):
        JobSlots(0)


def test_cap_two_four_commands_fifo() -> None:
    slots = JobSlots(2)
    order: list[int] = []
    waits: dict[int, Waiting] = {}
    most = 0
    release = {i: threading.Event() for i in range(4)}
    lock = threading.Lock()

    def command(i: int) -> None:
        nonlocal most
        with slots.slot(threading.Event(), lambda w: waits.__setitem__(i, w)) as got:
            assert got
            with lock:
                order.append(i)
                most = max(most, slots.active)
            release[i].wait(BUDGET)

    threads = []
    for i in range(4):
        threads.append(threading.Thread(target=command, args=(i,)))
        threads[-1].start()
        wait_until(
            lambda i=i: len(order) + slots.waiting == i + 1, BUDGET, f"command {i} to arrive"
        )
    assert order == [0, 1] and slots.waiting == 2
    assert waits == {2: Waiting(2, 2, 0), 3: Waiting(2, 2, 1)}
    release[1].set()
    wait_until(lambda: len(order) == 3, BUDGET, "command 2 to start")
    release[0].set()
    wait_until(lambda: len(order) == 4, BUDGET, "command 3 to start")
    release[2].set()
    release[3].set()
    for thread in threads:
        thread.join(BUDGET)
    assert order == [0, 1, 2, 3]
    assert most == 2 and slots.active == 0


def test_a_stopped_waiter_never_holds_a_slot_and_keeps_no_place() -> None:
    slots = JobSlots(1)
    stop = threading.Event()
    outcome: list[bool] = []
    with slots.slot(threading.Event(), lambda w: None):

        def waiter() -> None:
            with slots.slot(stop, lambda w: None) as got:
                outcome.append(bool(got))

        thread = threading.Thread(target=waiter)
        thread.start()
        wait_until(lambda: slots.waiting == 1, BUDGET, "the waiter to queue")
        stop.set()
        thread.join(BUDGET)
        assert outcome == [False]
        assert slots.waiting == 0 and slots.active == 1
    assert slots.active == 0
    with slots.slot(threading.Event(), lambda w: None) as got:
        assert got
