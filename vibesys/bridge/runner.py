"""The bridge's evaluations, submitted through `vibesys.Client.submit_request`: each accepted
evaluation is a journaled invocation, found again by its request id. A new request's id is
committed first, naming the invocation id it gets (write-ahead); only then is the invocation
recorded (PREPARED, with the candidate staged by the snapshot policy) and driven. The same id
again, from a reconnecting helper or after a restart, finds that row and follows the same
invocation: never a second one. One thread drives each invocation to its end through its
client handle (it takes the invocation's lease, so a restarted bridge takes over from a dead
one, and a restarted session starts those threads itself, helper or not: `resume`); the
evaluation's timeout, counted from the request's first acceptance, cancels it; teardown
cancels what still runs and waits for it to settle.

A profile is an evaluation whose command runs under the operator's profiler: the profiler's
name and its capture paths are recorded with the request, the captures are the request's
artifacts besides the agent's (in the invocation's request at PREPARED, before its stable job
name is committed and anything is submitted), so they come home verified like any artifact.
Nothing of the job's directory is removed here: a cancelled profile's job settles (the engine
waits for the scheduler to show it gone) while its files stay where the job wrote them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

from msgspec import structs

from vibesys.adapters.requests import ArtifactLimits
from vibesys.adapters.rundir.listing import DEFAULT_LIMITS
from vibesys.bridge.admission import Evaluation, Refusal
from vibesys.bridge.driving import ARTIFACT_LIMITS, EvaluationDriver
from vibesys.bridge.files import RESULT_FILE, stage_local_candidate
from vibesys.bridge.recorded import (
    Handle,
    evaluation_of,
    invocation_exists,
    same_evaluation,
    same_values,
)
from vibesys.bridge.site import Site
from vibesys.client import Client, Recording, RequestRow
from vibesys.config.profiler import EVALUATION_CAPTURE, ProfilerConfig
from vibesys.engine.context import load_context
from vibesys.errors import VibesysError
from vibesys.job_result import JobResult
from vibesys.journal_schema import Journal, open_journal
from vibesys.journal_schema.recorded_evaluations import RecordedEvaluation
from vibesys.osutil.artifact_walk import Limits
from vibesys.states import JobState

__all__ = ["ARTIFACT_LIMITS", "CAPTURES", "EvaluationRunner", "Handle"]

#: the request body's key for a profile's capture paths (relative to the job's directory)
CAPTURES: Final = "captures"

#: The variables an evaluation gets from the bridge's own environment (besides those passed):
#: what finding programs and the scheduler needs, nothing that may hold a credential.
HOST_VARIABLES: Final = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "SLURM_CONF"}
    | {"LC_ALL", "LC_CTYPE", "LC_COLLATE", "LC_MESSAGES", "LC_NUMERIC", "LC_TIME"}
)


class EvaluationRunner:
    """The bridge's evaluations on one journal: started (or found again) by request id,
    cancelled, carried on after a restart, and torn down."""

    def __init__(
        self,
        journal_path: Path,
        site: Site,
        results_root: Path,
        host_env: Mapping[str, str],
        *,
        max_retries: int = 2,
        unreachable_timeout_seconds: float = 600.0,
        artifact_limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self.journal_path = journal_path
        self.site = site
        self.results_root = results_root
        self.host_env = {k: v for k, v in host_env.items() if k in HOST_VARIABLES}
        self.max_retries = max_retries
        self._limits = ArtifactLimits.of(artifact_limits)
        self.unreachable_timeout = timedelta(seconds=unreachable_timeout_seconds)
        self._lock = threading.Lock()
        self._handles: dict[str, Handle] = {}
        self._closing: str | None = None
        self.client = Client(journal_path)
        self.driver = EvaluationDriver(journal_path, site, results_root)

    # -- requests -------------------------------------------------------------------------------

    def start(self, evaluation: Evaluation) -> tuple[Handle, bool]:
        """The handle of the evaluation's invocation, recorded now if the request is new;
        True when the request id was known already (a reattach). Refusal says why not."""
        self._refuse_if_closing()
        journal = open_journal(self.journal_path)
        try:
            earlier = journal.bridge.recorded_evaluation(evaluation.run_id, evaluation.request_id)
        finally:
            journal.close()
        request = None
        if earlier is None:
            # Everything that can refuse a new evaluation is checked before anything is
            # written: the site's request (limits, the candidate's digest).
            request = self._site_request(evaluation)
            # Recorded with the request: a restarted session keeps these limits, and a
            # profile's capture paths are known before anything is submitted.
            body = evaluation.body() | {ARTIFACT_LIMITS: structs.asdict(self._limits)}
            body |= self._captures(evaluation)
        else:
            body = earlier.body  # the row stays as it was: the evaluation is checked against it
        row = RequestRow(
            run_id=evaluation.run_id,
            request_id=evaluation.request_id,
            uid=evaluation.uid,
            workspace=evaluation.workspace,
            kind=evaluation.kind,
            body=body,
            results_dir=str(self.results_root),
        )
        with self._lock:
            self._refuse_if_closing()
            try:
                job, found, created = self.client.submit_request(
                    row,
                    lambda found: self._recording(found, evaluation, request),
                    lambda found: same_evaluation(found, evaluation),
                )
            except VibesysError as exc:  # the row stays: the same id tries again
                raise Refusal(f"the evaluation could not be recorded: {exc}") from None
            handle = self._handles.get(found.invocation_id)
            if handle is not None:
                same_values(handle.evaluation.env, evaluation)
                return handle, True
            if not created:
                try:
                    journal = open_journal(self.journal_path, readonly=True)
                    try:
                        recorded = load_context(journal.invocations.get(found.invocation_id)).env
                    finally:
                        journal.close()
                except VibesysError as exc:
                    raise Refusal(f"the evaluation could not be recorded: {exc}") from None
                same_values(recorded, evaluation)
            handle = Handle(found, evaluation, job)
            self._handles[found.invocation_id] = handle
        threading.Thread(target=self.driver.drive, args=(handle,), daemon=True).start()
        return handle, earlier is not None or not created

    def resume(self, run_id: str) -> list[Handle]:
        """At the session's start: a handle, and its driver, for every evaluation of the
        campaign recorded for this results directory that has not ended (or whose result was
        not copied), so that a restart carries them on whether or not a helper comes back:
        their deadlines, their places in the queue, their results. A helper that comes back
        finds its handle. A request whose invocation was never recorded is left to its helper
        (only it has the variables' values, and the candidate may have changed since): it
        holds no place in the queue, and its deadline still counts from its acceptance."""
        journal = open_journal(self.journal_path)
        handles: list[Handle] = []
        try:
            for row in journal.bridge.campaign_evaluations(run_id):
                if row.results_dir != str(self.results_root) or self._settled(journal, row):
                    continue
                evaluation = evaluation_of(row, journal.invocations.get(row.invocation_id))
                job = self.client.attach(row.invocation_id, drive=False)
                with self._lock:
                    if row.invocation_id not in self._handles:
                        handles.append(Handle(row, evaluation, job))
                        self._handles[row.invocation_id] = handles[-1]
        finally:
            journal.close()
        for handle in handles:
            threading.Thread(target=self.driver.drive, args=(handle,), daemon=True).start()
        return handles

    def _settled(self, journal: Journal, row: RecordedEvaluation) -> bool:
        """Nothing for a restart to carry on: never recorded, or ended with its result copied."""
        if not invocation_exists(journal, row.invocation_id):
            return True
        ended = journal.invocations.get(row.invocation_id).state is JobState.DONE
        return ended and (self.results_root / row.invocation_id / RESULT_FILE).is_file()

    def _refuse_if_closing(self) -> None:
        if self._closing is not None:
            raise Refusal(f"the session is shutting down ({self._closing})")

    def cancel(self, run_id: str, request_id: str, uid: int, by: str) -> str:
        """Ask for the request's evaluation to be cancelled; the message for the helper."""
        journal = open_journal(self.journal_path)
        try:
            row = journal.bridge.recorded_evaluation(run_id, request_id)
            if row is None or not invocation_exists(journal, row.invocation_id):
                raise Refusal(f"no evaluation has request id {request_id}", "request_id")
            if row.uid != uid:
                raise Refusal(f"request id {request_id} belongs to another user", "request_id")
        finally:
            journal.close()
        state = self.client.attach(row.invocation_id, drive=False).cancel(by)
        return f"cancel of {row.invocation_id} requested ({state})"

    def _profiler(self, evaluation: Evaluation) -> ProfilerConfig | None:
        if evaluation.profiler is None:
            return None
        profiler = self.site.profilers().get(evaluation.profiler)
        if profiler is None:  # the session's table changed under a recorded request
            raise Refusal(f"this session no longer offers the profiler {evaluation.profiler}")
        return profiler

    def _captures(self, evaluation: Evaluation) -> dict[str, list[str]]:
        profiler = self._profiler(evaluation)
        if profiler is None:
            return {}
        return {CAPTURES: list(profiler.capture_names(EVALUATION_CAPTURE))}

    def _site_request(self, evaluation: Evaluation) -> Any:
        captures = self._captures(evaluation).get(CAPTURES, [])
        try:
            return self.site.request(
                evaluation.workspace,
                evaluation.timeout_seconds,
                (*evaluation.artifacts, *captures),
                tuple(evaluation.env),
                self._limits,
                # A file of a capture's name in the workspace would pose as the capture: the
                # snapshot leaves such names out, so the job's copy never holds one.
                left_out=tuple("/" + pattern.lstrip("/") for pattern in captures),
            )
        except VibesysError as exc:
            raise Refusal(f"the site cannot take this evaluation: {exc}") from None

    def _recording(
        self, row: RecordedEvaluation, evaluation: Evaluation, request: Any
    ) -> Recording:
        """How the invocation the row names is recorded (nothing was sent for it yet)."""
        if request is None:  # the row survived a crash before its invocation was recorded
            request = self._site_request(evaluation)
        runs = self.journal_path.parent / "runs"
        cwd = evaluation.workspace
        command, env = evaluation.argv, {**self.host_env, **evaluation.env}
        profiler = self._profiler(evaluation)
        if profiler is not None:
            # The operator's variables win: the profiler needs them as configured.
            command = profiler.argv(command, EVALUATION_CAPTURE)
            env |= profiler.variables()
        if self.site.backend == "local":
            invocation_dir = (runs / row.invocation_id).resolve()
            cwd = str(stage_local_candidate(evaluation.workspace, runs / ".stage", invocation_dir))
        return Recording(
            argv=list(command),
            adapter=self.site.adapter,
            request=request,
            label=f"vibesys-eval {evaluation.kind} {evaluation.request_id}",
            cwd=cwd,
            env=env,
            campaign=evaluation.run_id,  # one evaluation at a time, across its sessions
            retries=self.max_retries,
            unreachable_timeout=self.unreachable_timeout.total_seconds(),
        )

    # -- teardown -------------------------------------------------------------------------------

    def close(self, reason: str, budget_seconds: float) -> list[Handle]:
        """Stop serving: refuse new requests, cancel every evaluation that has not ended, and
        wait up to `budget_seconds` for them to settle. Idempotent; the handles that did not
        settle in time (their results are UNRESOLVED)."""
        with self._lock:
            self._closing = self._closing or reason
            handles = list(self._handles.values())
        for handle in handles:
            if not handle.done.is_set():
                handle.stopping = handle.stopping or (
                    f"the session is shutting down ({reason}); the evaluation is cancelled"
                )
                handle.job.cancel(f"session teardown: {reason}")
        deadline = time.monotonic() + budget_seconds
        for handle in handles:
            handle.done.wait(max(deadline - time.monotonic(), 0.0))
        late = [handle for handle in handles if not handle.done.is_set()]
        for handle in late:
            handle.stop.set()
        return late

    def unsettled_result(self, handle: Handle) -> JobResult:
        """The result of an evaluation teardown could not settle: UNRESOLVED from its row."""
        return self.driver.unsettled_result(handle)
