"""One cap for a whole run (`RunSlots`): every broker of the run takes its slots from one line in
the shared journal, first come first served across brokers; a stopped waiter leaves without a
slot; a dead broker's tickets are given back (waiting ones at once, a held one once its job is
settled, which the next waiter is asked to do)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tests.broker.test_slots import BUDGET
from tests.helpers.hang_guard import wait_until
from tests.helpers.journal import commit_all, create
from vibesys.broker.jobs import StopSignal
from vibesys.broker.replies import Waiting
from vibesys.broker.run_slots import RunSlots, Settle
from vibesys.journal_schema import open_journal
from vibesys.osutil.proc import hostname, self_identity
from vibesys.states import Cancelled, CancelRequested, SubmitDispatched, SubmitIntended, Submitted

#: A broker of this host that is not running (its start time is not this pid's).
DEAD = f"{hostname()}:{os.getpid()}:1"


@pytest.fixture
def journal_file(tmp_path: Path) -> Path:
    path = tmp_path / "journal.db"
    open_journal(path).close()
    return path


def broker(journal_file: Path, cap: int | None = 2, run_id: str = "run-1") -> RunSlots:
    return RunSlots(journal_file, run_id, cap, self_identity())


def test_two_brokers_of_one_run_share_one_cap_first_come_first_served(
    journal_file: Path,
) -> None:
    brokers = [broker(journal_file), broker(journal_file)]
    order: list[int] = []
    waits: dict[int, Waiting] = {}
    held = 0
    most = 0
    lock = threading.Lock()
    release = {i: threading.Event() for i in range(4)}

    def command(i: int) -> None:
        nonlocal held, most
        slots = brokers[i % 2]  # the commands alternate between the two brokers
        with slots.slot(threading.Event(), lambda w: waits.__setitem__(i, w)) as got:
            assert got
            with lock:
                order.append(i)
                held += 1
                most = max(most, held)
            release[i].wait(BUDGET)
            with lock:
                held -= 1

    threads = []
    for i in range(4):
        threads.append(threading.Thread(target=command, args=(i,)))
        threads[-1].start()
        wait_until(
            lambda i=i: len(order) + brokers[0].waiting == i + 1, BUDGET, f"command {i} to queue"
        )
    assert order == [0, 1] and brokers[1].waiting == 2 and brokers[1].active == 2
    # a command counts as waiting just before it is told so
    wait_until(lambda: len(waits) == 2, BUDGET, "both waiting commands told so")
    assert waits == {2: Waiting(2, 2, 0), 3: Waiting(2, 2, 1)}
    release[1].set()
    wait_until(lambda: len(order) == 3, BUDGET, "command 2 (first in line, on broker 0)")
    release[0].set()
    wait_until(lambda: len(order) == 4, BUDGET, "command 3 (on broker 1)")
    release[2].set()
    release[3].set()
    for thread in threads:
        thread.join(BUDGET)
    assert order == [0, 1, 2, 3] and most == 2
    assert (brokers[0].active, brokers[0].waiting) == (0, 0)


def test_runs_do_not_share_a_cap(journal_file: Path) -> None:
    one, other = broker(journal_file, cap=1), broker(journal_file, cap=1, run_id="run-2")
    seen: list[Waiting] = []
    with one.slot(threading.Event(), seen.append) as a, other.slot(threading.Event(), seen.append):
        assert a and seen == []


def test_no_cap_takes_no_ticket(journal_file: Path) -> None:
    slots = broker(journal_file, cap=None)
    with slots.slot(threading.Event(), lambda w: None) as a, slots.slot(threading.Event(), print):
        assert a and (slots.active, slots.waiting) == (0, 0)
    with pytest.raises(ValueError):
        broker(journal_file, cap=0)


def test_a_stopped_waiter_leaves_the_line_holding_nothing(journal_file: Path) -> None:
    slots, stop = broker(journal_file, cap=1), threading.Event()
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
        assert outcome == [False] and (slots.active, slots.waiting) == (1, 0)


def test_a_dead_brokers_tickets_are_given_back(journal_file: Path) -> None:
    """Its waiting ticket and a slot it held before recording any job go at once."""
    journal = open_journal(journal_file)
    journal.slots.slot_enqueue("run-1", DEAD)  # waiting, ahead of the next
    held = journal.slots.slot_enqueue("run-1", DEAD)
    with journal.write_txn() as conn:
        conn.execute("UPDATE run_slots SET state='active' WHERE ticket=?", (held,))
    assert journal.slots.slot_counts("run-1") == (1, 1)
    journal.close()
    seen: list[Waiting] = []
    stop = threading.Event()
    timer = threading.Timer(5.0, stop.set)  # a line that never moves fails, never hangs
    timer.start()
    with broker(journal_file, cap=1).slot(stop, seen.append) as got:
        assert got and seen == []
    assert broker(journal_file).waiting == 0
    timer.cancel()


def dead_brokers_running_job(journal_file: Path) -> str:
    """An invocation submitted under a slot of run-1 whose broker is dead."""
    journal = open_journal(journal_file)
    inv = create(journal, "orphan1", adapter="srun", request={"cancel_when_orphaned": True})
    name = "vibesys-gpu-orphan1-1"
    inv = commit_all(
        journal, inv, [SubmitIntended(1, name), SubmitDispatched(1, name), Submitted("42")]
    )
    ticket = journal.slots.slot_enqueue("run-1", DEAD)
    journal.slots.slot_try(ticket, 2)
    journal.slots.slot_bind(ticket, inv.id)
    journal.close()
    return inv.id


def settler(journal_file: Path, asked: list[str]) -> Settle:
    def settle(invocation: str, stop: StopSignal) -> bool:
        # What the engine runner does: cancel it (its client is gone) until it is gone.
        asked.append(invocation)
        mine = open_journal(journal_file)
        current = mine.invocations.get(invocation)
        for event in (CancelRequested("its broker died"), Cancelled("scancel: gone")):
            current, _ = mine.commit_transition(current, event)
        mine.close()
        return True

    return settle


def test_a_dead_brokers_running_job_holds_its_slot_until_it_is_settled(
    journal_file: Path,
) -> None:
    invocation = dead_brokers_running_job(journal_file)
    asked: list[str] = []
    settle = settler(journal_file, asked)
    slots = RunSlots(journal_file, "run-1", 1, self_identity(), settle=settle)
    seen: list[Waiting] = []
    stop = threading.Event()
    timer = threading.Timer(5.0, stop.set)
    timer.start()
    with slots.slot(stop, seen.append) as got:
        assert got
    timer.cancel()
    assert asked == [invocation] and seen == [Waiting(1, 1, 0)]  # it counted until settled
    journal = open_journal(journal_file)
    assert journal.invocations.get(invocation).outcome == "CANCELLED"
    journal.close()


@pytest.mark.parametrize("cap", [None, 1])
def test_a_starting_broker_carries_on_a_dead_brokers_job_whatever_its_cap(
    journal_file: Path, cap: int | None
) -> None:
    """No command of its own needed: the run's dead broker's job is settled, its slot given
    back; another run's broker leaves it alone."""
    invocation = dead_brokers_running_job(journal_file)
    asked: list[str] = []
    settle = settler(journal_file, asked)
    RunSlots(journal_file, "run-2", cap, self_identity(), settle=settle).carry_on(threading.Event())
    assert asked == []
    slots = RunSlots(journal_file, "run-1", cap, self_identity(), settle=settle)
    slots.carry_on(threading.Event())
    assert asked == [invocation] and (slots.active, slots.waiting) == (0, 0)
    journal = open_journal(journal_file)
    assert journal.invocations.get(invocation).outcome == "CANCELLED"
    journal.close()
    slots.carry_on(threading.Event())  # nothing left to carry on
    assert asked == [invocation]


def test_a_stopped_carry_on_settles_nothing(journal_file: Path) -> None:
    dead_brokers_running_job(journal_file)
    asked: list[str] = []
    stop = threading.Event()
    stop.set()
    RunSlots(journal_file, "run-1", None, self_identity(), settler(journal_file, asked)).carry_on(
        stop
    )
    assert asked == []
