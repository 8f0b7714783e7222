"""An invocation's deadline: cancelled at the second its timeout is over, wherever it is then
(in the scheduler's queue, running). A scheduler's own limit is whole minutes, and ends the job
with its own state; this cancel is exact, and its `by` text marks it as the timeout's."""

from __future__ import annotations

import threading
from pathlib import Path

from vibesys.journal_schema import open_journal

__all__ = ["cancel_at_deadline"]


def cancel_at_deadline(
    journal_path: Path,
    invocation_id: str,
    left_seconds: float,
    done: threading.Event,
    by: str,
    owner: str | None = None,
) -> threading.Thread:
    """Start a thread that requests the invocation's cancel (`by`) once `left_seconds` have
    passed, unless `done` is set first. The driver picks the cancel up on its next round."""

    def wait_then_cancel() -> None:
        if done.wait(max(left_seconds, 0.0)):
            return
        from vibesys.engine.core import Engine

        journal = open_journal(journal_path)  # its own connection: this is another thread
        try:
            engine = Engine(journal) if owner is None else Engine(journal, owner=owner)
            engine.request_cancel(journal.get(invocation_id), by)
        finally:
            journal.close()

    thread = threading.Thread(target=wait_then_cancel, name="vibesys-deadline", daemon=True)
    thread.start()
    return thread
