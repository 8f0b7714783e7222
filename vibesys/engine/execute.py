"""Carrying out the effects a committed transition authorized: the one place that calls an
adapter's side effects and crosses the failpoints. It decides nothing and writes nothing: it
returns what an effect showed (`engine/seen.py`: a receipt, what an error proves, the claim a
fence read, a collection's evidence) and the planner (`plan.proven`) maps that to the next
event. What a collection brings home on the way (log bytes, artifacts) is yielded, and the
engine records each step before the effect goes on (`records.record_step`, in the step that
carries the effect out).

The error boundary is here and only here: an adapter error says what it proves through two
fields, `maybe_submitted` and `retryable` (`vibesys.errors`), and `error_facts` reads those
fields alone, never the message text. Errors that are not ours (a bug in an adapter) count as
"may have been submitted": the safe reading. A journal that fails under an effect is not the
effect's failure: it passes every boundary, since nothing can be recorded.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from vibesys.adapters.base import Backend, GatheredCollection, JobRef, RemoteFiles, Submission
from vibesys.adapters.leases import LeasePlan, LeaseReceipt, LeasingBackend
from vibesys.adapters.rundir.claim import fence_text
from vibesys.adapters.rundir.names import STDERR_FILE, STDOUT_FILE
from vibesys.engine.artifacts import collect_artifacts
from vibesys.engine.chains import submit_after
from vibesys.engine.context import load_context
from vibesys.engine.failpoints import failpoint
from vibesys.engine.observe import claim_job_id
from vibesys.engine.seen import (
    ClaimRead,
    ErrorFacts,
    Fact,
    Gathered,
    LogsHome,
    Progressed,
    Receipt,
    SubmitFailed,
)
from vibesys.errors import BackendError, ConfigError, JournalFault, SubmitRejected, UsageError
from vibesys.journal_schema import Invocation, Journal, iso
from vibesys.states import Cancel, Collect, Effect, Fence, JobState, Submit

if TYPE_CHECKING:
    from vibesys.engine.core import Engine


#: The journal failing under an effect (its writes, or its reads): the driver must stop.
JOURNAL_FAILURES = (JournalFault, sqlite3.Error)


#: How often a requested cancel is sent again while the job has not settled.
CANCEL_RESEND_SECONDS = 5.0

#: Effects the engine does not call an adapter for: the drive loop carries them out (the next
#: observation, the backoff), or the caller does (reporting the end).
WAITING_EFFECTS = ("Poll", "Resolve", "ScheduleRetry", "Finish")


class CancelResends:
    """When this process last sent each attempt's cancel: once, then again every few seconds
    until it settles (a repeated cancel may escalate)."""

    def __init__(self) -> None:
        self._sent: dict[tuple[str, int], float] = {}

    def due(self, inv: Invocation) -> bool:
        """Whether to send `inv`'s cancel now (noted as sent when it is)."""
        key = (inv.id, inv.attempt)
        now = time.monotonic()
        last = self._sent.get(key)
        if last is not None and now - last < CANCEL_RESEND_SECONDS:
            return False
        self._sent[key] = now
        return True


def error_facts(error: Exception) -> ErrorFacts:
    if isinstance(error, BackendError):
        return ErrorFacts(
            error.maybe_submitted,
            error.retryable,
            isinstance(error, SubmitRejected),
            error.evidence,
            error.fix,
        )
    if isinstance(error, UsageError | ConfigError):
        # Checked before anything is sent: nothing was submitted, and it will not fix itself.
        return ErrorFacts(False, False, False, str(error), "fix the request or the configuration")
    return ErrorFacts(True, True, False, f"{type(error).__name__}: {error}", "")


def execute(
    engine: Engine, inv: Invocation, effect: Effect
) -> Generator[Progressed, None, Fact | None]:
    """Carry out `effect` for `inv`; return what it showed (None: nothing proven), yielding
    what it brings home on the way."""
    match effect:
        case Submit():
            return _submit(engine, inv)
        case Collect():
            return (yield from _collect(engine, inv))
        case Cancel():
            _cancel(engine, inv)
            return None
        case Fence():
            return _fence(engine, inv)
    assert type(effect).__name__ in WAITING_EFFECTS, effect
    return None


def submission(engine: Engine, inv: Invocation) -> Submission[Any]:
    """What the adapter submits for `inv`'s attempt: its name, command, directory, recorded
    context, typed request and the parent's job it waits on now."""
    ref = engine.adapters.job_ref(inv)
    request = engine.adapters.request_of(inv)
    return Submission(
        inv.id,
        inv.attempt,
        ref.job_name,
        inv.command,
        ref.attempt_dir,
        load_context(inv),
        request,
        submit_after(engine, inv, request),
    )


def _submit(engine: Engine, inv: Invocation) -> Fact:
    try:
        request = submission(engine, inv)
        receipt = engine.adapters.backend(inv).submit(request)
    except JOURNAL_FAILURES:
        raise
    except Exception as exc:  # the boundary: every failure becomes what it proves
        return SubmitFailed(error_facts(exc))
    failpoint("after_submit_effect")
    return Receipt(receipt.job_id, receipt.observation)


def launch_cluster(backend: LeasingBackend, plan: LeasePlan) -> LeaseReceipt | BackendError:
    """The launch of a campaign's cluster, its intent committed: the allocation it left, or
    the error that says what it proves (a failure that is not ours propagates)."""
    try:
        receipt = backend.launch(plan)
    except JOURNAL_FAILURES:
        raise
    except BackendError as exc:
        return exc
    failpoint("after_launch_effect")
    return receipt


def release_cluster_effect(backend: LeasingBackend) -> str:
    """The release of a campaign's cluster, its intent committed: what the release showed (an
    error propagates: the lease stays `releasing`, for reconcile)."""
    evidence = backend.release()
    failpoint("after_release_effect")
    return evidence


_AMBIGUOUS = "the attempt's submission is ambiguous"


def _fence(engine: Engine, inv: Invocation) -> Fact | None:
    ref = engine.adapters.job_ref(inv)
    # A running attempt is fenced only when the scheduler ended its job before its start.
    why = "its job ended before it started" if inv.state is JobState.RUNNING else _AMBIGUOUS
    text = fence_text(engine.owner, iso(engine.clock()), why)
    try:
        claim = engine.adapters.backend(inv).fence(ref, text)
    except JOURNAL_FAILURES:
        raise
    except Exception as exc:
        engine.note(inv, f"fence failed: {error_facts(exc).reason}")
        return None  # nothing proven: the invocation stays where it is, the fence is retried
    failpoint("after_fence_effect")
    job_id = "" if claim.fenced else claim_job_id(claim)
    return ClaimRead(claim.fenced, job_id, claim.describe(), claim.text)


def _collect(engine: Engine, inv: Invocation) -> Generator[Progressed, None, Fact | None]:
    ref, backend = engine.adapters.job_ref(inv), engine.adapters.backend(inv)
    wanted = list(engine.adapters.request_of(inv).artifacts)
    try:
        # Logs and artifacts come home before anything may clean the remote directory: in
        # one command where the adapter can, else log by log, then the marker, the listing.
        gathered = yield from spool_gathered(engine.journal, backend, ref, wanted)
        if gathered is None:
            yield from spool_logs(engine.journal, backend, ref)
            collected = backend.collect(ref)
        else:
            collected = gathered.evidence
        listing = None if gathered is None else gathered.listing
        artifacts = yield from collect_artifacts(
            engine.journal, backend, ref, wanted, engine.progress, listing=listing
        )
    except JOURNAL_FAILURES:
        raise
    except Exception as exc:
        engine.note(inv, f"collection failed, will retry: {error_facts(exc).reason}")
        return None
    evidence = "; ".join(text for text in (collected, artifacts) if text)
    failpoint("after_collect_effect")
    return Gathered(evidence)


def _cancel(engine: Engine, inv: Invocation) -> None:
    if not engine.cancels.due(inv):
        return
    try:
        engine.adapters.backend(inv).cancel(engine.adapters.job_ref(inv))
    except JOURNAL_FAILURES:
        raise
    except Exception as exc:
        engine.note(inv, f"cancel not sent, will retry: {error_facts(exc).reason}")
        return
    failpoint("after_cancel_effect")


# -- the log spool --------------------------------------------------------------------------
# Remote logs copied home by byte offset, the offset committed to the journal. For each attempt
# and stream the journal holds how many bytes are safely home. A pump first cuts the local file
# back to that offset (bytes appended by a process that crashed before it could commit them are
# read again), appends what the remote file has beyond it, fsyncs, and only then yields the new
# offset (`LogsHome`), which the engine records before the pump goes on. So after a reconnect,
# a crash and `reconcile`, or `vibesys logs --follow`, the local spool ends byte-identical to the
# remote file: nothing lost, nothing twice.

STREAMS = (STDOUT_FILE, STDERR_FILE)


def spool_logs(journal: Journal, backend: Backend, job: JobRef) -> Generator[LogsHome, None, int]:
    """Bring every new byte of the job's logs home, stream by stream; how many arrived."""
    files = backend.remote_files()
    if files is None or job.attempt < 1:
        return 0
    job.attempt_dir.mkdir(parents=True, exist_ok=True)
    arrived = 0
    for stream in STREAMS:
        arrived += yield from _spool_one(journal, files, job, stream, job.attempt_dir / stream)
    return arrived


def _spool_one(
    journal: Journal, backend: RemoteFiles, job: JobRef, stream: str, local: Path
) -> Generator[LogsHome, None, int]:
    committed = journal.progress.spool_offset(job.invocation_id, job.attempt, stream)
    with open(local, "ab") as handle:
        cut = _cut_back(handle, committed)
        arrived = backend.read_log(job, stream, committed, handle)
        if arrived or cut:
            # The pump runs every few hundred milliseconds while a job runs, mostly finding
            # nothing new: an fsync then would be one per stream per turn, for nothing.
            handle.flush()
            os.fsync(handle.fileno())
    if arrived:
        failpoint("after_spool_append")
        yield LogsHome(job.invocation_id, job.attempt, stream, committed + arrived, arrived)
    return arrived


def _cut_back(handle: BinaryIO, committed: int) -> bool:
    """Put the spool file (open for appending) at the journal's offset; whether it moved.
    More than committed: a crash between append and commit. Less: the file was removed by
    hand. Either way the journal's offset is the truth."""
    if handle.tell() == committed:
        return False
    handle.truncate(committed)
    handle.seek(committed)
    return True


def spool_gathered(
    journal: Journal, backend: Backend, job: JobRef, patterns: list[str]
) -> Generator[LogsHome, None, GatheredCollection | None]:
    """Collect in one command where the adapter can (`GathersCollection`): both logs' rest
    comes home with the same rules as `spool_logs` (cut back to the committed offset, append,
    fsync, then the offset), the marker and the listing with them. None: collect the usual way."""
    gathers = backend.gathers_collection()
    if gathers is None or job.attempt < 1:
        return None
    job.attempt_dir.mkdir(parents=True, exist_ok=True)
    offsets = {s: journal.progress.spool_offset(job.invocation_id, job.attempt, s) for s in STREAMS}
    with (
        open(job.attempt_dir / STDOUT_FILE, "ab") as out,
        open(job.attempt_dir / STDERR_FILE, "ab") as err,
    ):
        handles = {STDOUT_FILE: out, STDERR_FILE: err}
        for stream, handle in handles.items():
            _cut_back(handle, offsets[stream])
        gathered = gathers.gather_collection(job, offsets, patterns, handles)
        if gathered is None:
            return None
        for handle in handles.values():
            handle.flush()
            os.fsync(handle.fileno())
    for stream in STREAMS:
        arrived = gathered.log_bytes.get(stream, 0)
        if arrived:
            failpoint("after_spool_append")
            yield LogsHome(
                job.invocation_id, job.attempt, stream, offsets[stream] + arrived, arrived
            )
    return gathered
