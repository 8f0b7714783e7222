"""Driving one evaluation of the bridge to its end: its client handle's `follow`, the cancel at
its deadline (counted from the request's first acceptance), and its result (a local
evaluation's artifacts recorded, the JobResult copied to the session's results)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Final

from vibesys.adapters.requests import recorded_limits
from vibesys.adapters.rundir.listing import DEFAULT_LIMITS
from vibesys.bridge.files import copy_result, ran, record_local_artifacts
from vibesys.bridge.recorded import Handle
from vibesys.bridge.site import Site
from vibesys.engine import DriveOptions
from vibesys.engine.cancel import cancel_at_deadline
from vibesys.engine.observation import deadline_of
from vibesys.job_result import JobResult, JobStatus, job_result
from vibesys.journal_schema import Journal, open_journal
from vibesys.osutil.logtail import SpoolOnly
from vibesys.states import JobState

__all__ = ["ARTIFACT_LIMITS", "EvaluationDriver"]

_ENDED: Final = (JobState.DONE, JobState.UNRESOLVED, JobState.COLLECTING)
#: the request body's key for the artifact limits the session applies to it
ARTIFACT_LIMITS: Final = "artifact_limits"


class EvaluationDriver:
    """Drives the bridge's evaluations on one journal, each from a thread of its own."""

    def __init__(
        self,
        journal_path: Path,
        site: Site,
        results_root: Path,
    ) -> None:
        self.journal_path = journal_path
        self.site = site
        self.results_root = results_root

    def drive(self, handle: Handle) -> None:
        """Drive the evaluation to its end (from a thread of its own); its result, or why it
        stopped, on the handle."""
        journal = open_journal(self.journal_path)
        try:
            self._deadline(handle)
            options = DriveOptions(tail=SpoolOnly(), interrupt=handle.stop)
            inv = journal.invocations.get(handle.invocation_id)
            while inv.state not in _ENDED and not handle.stop.is_set():
                inv = handle.job.follow(options)
            handle.result = self._finish(journal, handle)
        except Exception as exc:  # a thread must never die silently: the helper is told
            handle.stopping = handle.stopping or f"the bridge failed: {type(exc).__name__}: {exc}"
        finally:
            handle.done.set()
            journal.close()

    def _deadline(self, handle: Handle) -> None:
        """Cancel the evaluation once its timeout, counted from its first acceptance, is
        over (at once when that was while nothing ran; the cancel's `by` marks it: TIMEOUT)."""
        deadline = deadline_of(handle.row)
        if deadline is None:
            return
        left = deadline.left(datetime.now(deadline.at.tzinfo))
        cancel_at_deadline(self.journal_path, handle.invocation_id, left, handle.done, deadline.by)

    def _finish(self, journal: Journal, handle: Handle) -> JobResult:
        """The evaluation's result through its client handle (one its teardown could not
        settle is UNRESOLVED), a local evaluation's artifacts recorded first, copied into the
        session's results."""
        inv = journal.invocations.get(handle.invocation_id)
        bridge = journal.bridge.recorded_evaluation_of(inv.id)
        patterns = list(bridge.body.get("artifacts", [])) if bridge else []
        if self.site.backend == "local" and ran(inv) and patterns:
            recorded = bridge.body.get(ARTIFACT_LIMITS) if bridge else None
            limits = recorded_limits(recorded) or DEFAULT_LIMITS
            record_local_artifacts(journal, inv, patterns, limits)
        found = handle.job.result(unfinished=JobStatus.UNRESOLVED)
        final = copy_result(found, self.results_root)
        return found.model_copy(update={"results_dir": str(final)})

    def unsettled_result(self, handle: Handle) -> JobResult:
        """The result of an evaluation teardown could not settle: UNRESOLVED from its row."""
        journal = open_journal(self.journal_path, readonly=True)
        try:
            inv = journal.invocations.get(handle.invocation_id)
            return job_result(
                inv,
                journal.invocations.attempts(inv.id),
                journal.invocations.history(inv.id),
                unfinished=JobStatus.UNRESOLVED,
            )
        finally:
            journal.close()
