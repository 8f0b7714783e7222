"""`vibesys cancel`: commit the intent, send the cancel, wait until it has settled.

CANCELLED is reported only when nothing of the invocation runs any more: the scheduler (or the
local adapter, looking at the command's process group) shows the job ended, or a fence proves
its command never starts. When that cannot be proven the invocation stays UNRESOLVED, with the
evidence. A job whose end was proven before the cancel keeps its outcome. A deadline's
cancel is the same request, made by a thread once the time is over.
"""

from __future__ import annotations

import threading
from pathlib import Path

from vibesys.engine.core import Engine
from vibesys.engine.drive import DriveOptions, wait_for
from vibesys.journal_schema import Invocation, open_journal


def cancel_invocation(engine: Engine, invocation_id: str) -> Invocation:
    inv = engine.journal.invocations.get(invocation_id)
    engine.request_cancel(inv, "vibesys cancel")
    return wait_for(engine, invocation_id, DriveOptions())


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
        journal = open_journal(journal_path)  # its own connection: this is another thread
        try:
            engine = Engine(journal) if owner is None else Engine(journal, owner=owner)
            engine.request_cancel(journal.invocations.get(invocation_id), by)
        finally:
            journal.close()

    thread = threading.Thread(target=wait_then_cancel, name="vibesys-deadline", daemon=True)
    thread.start()
    return thread
