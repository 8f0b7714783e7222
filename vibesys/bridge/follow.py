"""What one connected helper is told, as it happens, read from the journal and the log spool:
its queue position until the evaluation starts, where each attempt runs, the output by byte
offset, and at the end the result.

A follower only reads (its own journal connection, the spool files); the runner drives. A
helper that reconnects says how far its copy of the output goes (`resume`); it is sent the
rest of that attempt, or a later attempt's output from its start. The spool files only grow
(bytes past the journal's committed offset are cut back after a crash and copied again, the
same bytes), so an offset means the same thing across reconnects and restarts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from vibesys.bridge.protocol import Resume
from vibesys.bridge.queue import queue_position
from vibesys.bridge.replies import Output, Queued, Reply, Started, Stream
from vibesys.client import Client
from vibesys.journal_schema import Invocation, Journal
from vibesys.states import JobState

__all__ = ["OUTPUT_CHUNK", "Follower"]

#: Output is cut into replies of at most this many bytes (before base64).
OUTPUT_CHUNK: Final = 48 * 1024
_STARTED: Final = (JobState.RUNNING, JobState.COLLECTING, JobState.DONE, JobState.UNRESOLVED)


class Follower:
    def __init__(
        self,
        journal: Journal,
        invocation_id: str,
        run_id: str,
        cluster: str | None,
        resume: Resume,
        send: Callable[[Reply], None],
    ) -> None:
        self._journal = journal
        self._id = invocation_id
        # The output is read by the invocation's client handle, on this follower's connection.
        self._job = Client(journal).attach(invocation_id, drive=False, record_missing=False)
        self._run_id = run_id
        self._cluster = cluster
        self._resume = resume
        self._send = send
        self._position: int | None = None
        self._started: set[int] = set()
        self._attempt = 0
        self._offsets = {"stdout": 0, "stderr": 0}

    def step(self) -> Invocation:
        """Send whatever is new; return the invocation as read."""
        inv = self._journal.invocations.get(self._id)
        waiting = inv.attempt < 1 or (inv.state not in _STARTED and inv.job_id is None)
        if waiting or self._position is None:  # told at least once, before it starts
            position = queue_position(self._journal, self._id)
            if position != self._position:
                self._position = position
                self._send(Queued(position, _queued_text(position)))
        if not waiting and inv.attempt not in self._started:
            self._started.add(inv.attempt)
            self._send(Started(inv.attempt, self._cluster, inv.job_id))
        self._output(inv)
        return inv

    def _output(self, inv: Invocation) -> None:
        if inv.attempt < 1:
            return
        if inv.attempt != self._attempt:
            self._attempt = inv.attempt
            resumed = inv.attempt == self._resume.attempt
            self._offsets = {
                "stdout": self._resume.stdout if resumed else 0,
                "stderr": self._resume.stderr if resumed else 0,
            }
        streams: tuple[Stream, ...] = ("stdout", "stderr")
        for stream in streams:
            offset = self._offsets[stream]
            output = self._job.logs(
                stream=stream, offset=offset, attempt=inv.attempt, chunk=OUTPUT_CHUNK
            )
            for chunk in output:
                self._send(Output(inv.attempt, stream, offset, chunk))
                offset += len(chunk)
            self._offsets[stream] = offset


def _queued_text(position: int) -> str:
    if position == 0:
        return "[vibesys-eval] queued: nothing of the campaign is ahead"
    noun = "evaluation" if position == 1 else "evaluations"
    return f"[vibesys-eval] queued: {position} {noun} of the campaign ahead"
