"""`vibesys cancel`: commit the intent, send the cancel, wait until it has settled.

CANCELLED is reported only when nothing of the invocation runs any more: the scheduler (or the
local adapter, looking at the command's process group) shows the job ended, or a fence proves
its command never starts. When that cannot be proven the invocation stays UNRESOLVED, with the
evidence. A job whose end was proven before the cancel keeps its outcome.
"""

from __future__ import annotations

from vibesys.engine.core import Engine
from vibesys.engine.drive import DriveOptions, wait_for
from vibesys.journal_schema import Invocation


def cancel_invocation(engine: Engine, invocation_id: str) -> Invocation:
    inv = engine.journal.invocations.get(invocation_id)
    engine.request_cancel(inv, "vibesys cancel")
    return wait_for(engine, invocation_id, DriveOptions())
