"""`max_concurrent_jobs` for a whole run: every broker of the run (started with the same run id
on the same journal) takes its slots from one line in the journal (`run_slots`), so the run
never holds more than `cap` jobs in Slurm however many candidate sessions it has.

First come, first served across brokers (tickets only grow); a command that waits says so once
(the same `Waiting` line as one broker's cap) and leaves the line without a job when its client
goes. A slot is held from before the submission until the job has left the scheduler. A broker
that dies gives its slots back: a waiting ticket at once, a held one once its job is settled
(`settle`, given the orphaned invocation, cancels it: its client is gone with the broker).
A broker of the run also settles them as it starts (`carry_on`), whether or not it has a cap and
whether or not a command of its own waits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from vibesys.broker.jobs import StopSignal
from vibesys.broker.replies import Waiting
from vibesys.broker.slots import Held
from vibesys.journal_schema import Journal, open_journal

__all__ = ["RunSlots"]

#: How often a waiting command looks at the line again (another broker's release is seen then;
#: this broker's own wakes its waiters at once).
RECHECK_SECONDS: Final = 0.25

#: Settles a dead broker's invocation (cancels it and waits until it is gone); False when it
#: could not (someone else is on it, or the outcome cannot be proven yet).
Settle = Callable[[str, StopSignal], bool]


class RunSlots:
    def __init__(
        self,
        journal_path: Path,
        run_id: str,
        cap: int | None,
        owner: str,
        settle: Settle | None = None,
    ) -> None:
        if cap is not None and cap <= 0:
            raise ValueError(f"cap {cap}: must be a positive integer or None")
        self.journal_path = journal_path
        self.run_id = run_id
        self.cap = cap
        self.owner = owner
        self.settle = settle
        self._wake = threading.Condition()

    @property
    def active(self) -> int:
        return self._counts()[0]

    @property
    def waiting(self) -> int:
        return self._counts()[1]

    def _counts(self) -> tuple[int, int]:
        journal = open_journal(self.journal_path)
        try:
            return journal.slots.slot_counts(self.run_id)
        finally:
            journal.close()

    def carry_on(self, stop: StopSignal) -> None:
        """Settle, one after the other, the invocations the run's dead brokers left in the
        scheduler (as their slots recorded them when this starts), then give their slots
        back; whatever the cap, and stopped by `stop`. An invocation another live process
        drives, or whose end cannot be proven yet, is left as it is (with its captures)."""
        if self.settle is None:
            return
        journal = open_journal(self.journal_path)
        try:
            for invocation in journal.slots.slot_orphans(self.run_id, self.owner):
                if stop.is_set():
                    return
                self.settle(invocation, stop)
            journal.slots.slot_orphans(self.run_id, self.owner)  # the settled ones' slots
        finally:
            journal.close()
        with self._wake:
            self._wake.notify_all()

    @contextmanager
    def slot(self, stop: StopSignal, on_wait: Callable[[Waiting], None]) -> Iterator[Held]:
        """Hold one of the run's slots for the body (a false `Held` if `stop` came first)."""
        if self.cap is None:
            yield Held(True)
            return
        # One connection per command: SQLite connections stay in the thread that opened them.
        journal = open_journal(self.journal_path)
        ticket = journal.slots.slot_enqueue(self.run_id, self.owner)
        held = Held(False, bind=lambda invocation: journal.slots.slot_bind(ticket, invocation))
        try:
            held.acquired = self._wait(journal, ticket, stop, on_wait)
            yield held
        finally:
            journal.slots.slot_release(ticket)
            journal.close()
            with self._wake:
                self._wake.notify_all()

    def _wait(
        self, journal: Journal, ticket: int, stop: StopSignal, on_wait: Callable[[Waiting], None]
    ) -> bool:
        assert self.cap is not None
        told = False
        while True:
            view = journal.slots.slot_try(ticket, self.cap)
            if view.granted:
                return True
            if stop.is_set():
                return False
            if not told:
                told = True
                on_wait(Waiting(view.active, self.cap, view.ahead))
            for invocation in view.orphans:
                if self.settle is not None and not stop.is_set():
                    self.settle(invocation, stop)
            with self._wake:
                self._wake.wait(RECHECK_SECONDS)
