"""The engine: the only place that ties states, the journal and the adapters together.

Every step follows the write-ahead rule: commit the transition, then perform the effect it
authorizes, then commit what the effect showed. A failpoint sits after every commit and after
every effect, so crash tests can stop the process at each seam.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from vibesys.adapters.base import Backend, JobRef, RemoteState, RemoteStatus, SubmitRequest
from vibesys.engine.artifacts import collect_artifacts
from vibesys.engine.failpoints import failpoint
from vibesys.engine.observe import describe, terminal_event
from vibesys.engine.retry import RetryPolicy, next_attempt_at
from vibesys.engine.spool import spool_logs
from vibesys.errors import BackendError, StaleState, SubmitRejected
from vibesys.journal_schema import Invocation, Journal, iso, utc_now
from vibesys.proc import self_identity
from vibesys.states import (
    OUTCOME_OF,
    Cancelled,
    CancelRequested,
    Collected,
    Event,
    FailureClass,
    InfraFailed,
    JobState,
    OutcomeUnknown,
    Rejected,
    RetryBudgetSpent,
    SubmitIntended,
    Submitted,
)

#: Builds the adapter an invocation names, from its adapter name and recorded options (for
#: instance the site configuration file of a Slurm adapter).
BackendFactory = Callable[[str, Mapping[str, Any]], Backend]
#: An observation of one job: its status, or the error that kept us from seeing it.
Observation = RemoteStatus | BackendError


def job_name(invocation_id: str, attempt: int, prefix: str = "vibesys") -> str:
    """The stable, scheduler-visible name of one attempt: the key every lookup uses."""
    return f"{prefix}-{invocation_id}-{attempt}"


def job_name_of(inv: Invocation, attempt: int) -> str:
    """An invocation's attempt name; `job_name_prefix` in its options replaces `vibesys`
    (the broker's GPU jobs are `vibesys-gpu-<invocation>-<attempt>`)."""
    return job_name(inv.id, attempt, str(inv.options.get("job_name_prefix", "vibesys")))


def backend_key(inv: Invocation) -> tuple[str, str]:
    """Invocations with the same key share one adapter (and one batched status call)."""
    return inv.adapter, str(inv.options.get("site_config", ""))


def new_invocation_id() -> str:
    return secrets.token_hex(6)


@dataclass
class Engine:
    journal: Journal
    backends: BackendFactory
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    lease_ttl: timedelta = timedelta(seconds=30)
    owner: str = field(default_factory=self_identity)
    #: (invocation, attempt) pairs whose intent this process committed and has not yet acted
    #: on: only for those is it certain that nothing was submitted.
    _fresh_intents: set[tuple[str, int]] = field(default_factory=set)
    _backends: dict[tuple[str, str], Backend] = field(default_factory=dict)

    def backend(self, inv: Invocation) -> Backend:
        key = backend_key(inv)
        if key not in self._backends:
            self._backends[key] = self.backends(inv.adapter, inv.options)
        return self._backends[key]

    # -- creating ---------------------------------------------------------------------------

    def prepare(
        self,
        *,
        adapter: str,
        command: list[str],
        options: dict[str, Any] | None = None,
        label: str | None = None,
        max_retries: int | None = None,
        run_root: Path | None = None,
        snapshot_digest: str | None = None,
    ) -> Invocation:
        invocation_id = new_invocation_id()
        root = run_root or self.journal.path.parent / "runs"
        invocation = self.journal.create_invocation(
            invocation_id=invocation_id,
            adapter=adapter,
            command=command,
            options=options or {},
            label=label,
            max_retries=self.retry.max_retries if max_retries is None else max_retries,
            run_dir=str((root / invocation_id).resolve()),
            lease_owner=self.owner,
            lease_ttl=self.lease_ttl,
            snapshot_digest=snapshot_digest,
        )
        failpoint("after_prepare_commit")
        return invocation

    # -- one step ---------------------------------------------------------------------------

    def job_ref(self, invocation: Invocation) -> JobRef:
        attempts = self.journal.attempts(invocation.id)
        current = attempts[-1] if attempts else None
        name = current.job_name if current else job_name_of(invocation, invocation.attempt)
        intended = datetime.fromisoformat(current.intended_at) if current else None
        return JobRef(
            name,
            current.job_id if current else None,
            Path(invocation.run_dir) / str(invocation.attempt),
            intended,
            invocation.id,
            invocation.attempt,
        )

    def needs_observation(self, invocation: Invocation) -> bool:
        """Whether the next step of `invocation` needs the adapter's view of its job."""
        if invocation.state is JobState.SUBMITTING:
            return (invocation.id, invocation.attempt) not in self._fresh_intents
        return invocation.state in (JobState.RUNNING, JobState.UNRESOLVED)

    def observe(self, invocation: Invocation) -> Observation:
        ref = self.job_ref(invocation)
        try:
            return self.backend(invocation).status([ref])[ref.job_name]
        except BackendError as exc:
            return exc

    def advance(self, invocation: Invocation, observed: Observation | None = None) -> Invocation:
        """Take every step that is possible now; return the invocation as last committed.

        `observed` is the adapter's view of the current attempt, fetched by the caller (who may
        batch it with others); when a step needs one and none is given, it is fetched here.
        """
        while True:
            if self.needs_observation(invocation) and observed is None:
                observed = self.observe(invocation)
            try:
                after = self._step(invocation, observed)
            except StaleState:
                after = self.journal.get(invocation.id)
            if after.version == invocation.version and after.state == invocation.state:
                return after
            # A lookup that found the job also tells how it is doing: no second status call.
            found = after.state is JobState.RUNNING and isinstance(observed, RemoteStatus)
            invocation, observed = after, (observed if found else None)

    def _step(self, inv: Invocation, observed: Observation | None) -> Invocation:
        match inv.state:
            case JobState.PREPARED:
                return self._intend(inv, 1)
            case JobState.SUBMITTING:
                return self._submitting(inv, observed)
            case JobState.RUNNING:
                return self._running(inv, observed)
            case JobState.COLLECTING:
                return self._collect(inv)
            case JobState.RETRYING:
                return self._retrying(inv)
            case JobState.UNRESOLVED:
                return self._unresolved(inv, observed)
        return inv

    def _commit(self, inv: Invocation, event: Event) -> Invocation:
        after, _ = self.journal.commit_transition(inv, event)
        return after

    def _intend(self, inv: Invocation, attempt: int) -> Invocation:
        after = self._commit(inv, SubmitIntended(attempt, job_name_of(inv, attempt)))
        self._fresh_intents.add((inv.id, attempt))
        failpoint("after_submit_intent")
        return after

    def _submitting(self, inv: Invocation, observed: Observation | None) -> Invocation:
        if (inv.id, inv.attempt) in self._fresh_intents:
            self._fresh_intents.discard((inv.id, inv.attempt))
            if inv.cancel_requested:
                return self._commit(inv, Cancelled("cancelled before submission"))
            return self._submit(inv)
        # After a crash or a hand-over: find the job by its stable name before anything else.
        assert observed is not None
        if isinstance(observed, BackendError):
            return self._unknown(inv, f"lookup by name failed: {observed.evidence}")
        if observed.state is RemoteState.NOT_FOUND:
            if inv.cancel_requested:
                return self._commit(inv, Cancelled(f"proven never submitted: {describe(observed)}"))
            return self._submit(inv)
        if observed.state is RemoteState.PENDING and observed.job_id is None:
            return inv  # still starting (a launch under way): look again next round
        if observed.state is RemoteState.UNKNOWN or observed.job_id is None:
            return self._unknown(inv, describe(observed))
        return self._submitted(inv, observed.job_id, f"found by name: {describe(observed)}")

    def _submit(self, inv: Invocation) -> Invocation:
        ref = self.job_ref(inv)
        request = SubmitRequest(
            inv.id, inv.attempt, ref.job_name, inv.command, ref.run_dir, inv.options
        )
        backend = self.backend(inv)
        try:
            receipt = backend.submit(request)
        except SubmitRejected as exc:
            return self._commit(inv, Rejected(exc.evidence))
        except BackendError as exc:
            if exc.maybe_submitted:
                # The submit may have gone through: only a lookup by name can tell.
                seen = self.observe(inv)
                if isinstance(seen, RemoteStatus) and seen.state is RemoteState.NOT_FOUND:
                    return self._infra_failed(
                        inv,
                        FailureClass.TRANSPORT_LOST,
                        f"submit failed ({exc.evidence}); proven absent: {describe(seen)}",
                    )
                return self._submitting(inv, seen)
            return self._infra_failed(
                inv,
                FailureClass.TRANSPORT_LOST,
                f"submit failed, nothing submitted: {exc.evidence}",
            )
        failpoint("after_submit_effect")
        return self._submitted(inv, receipt.job_id, receipt.observation)

    def _submitted(self, inv: Invocation, job_id: str, observation: str) -> Invocation:
        after = self._commit(inv, Submitted(job_id, observation))
        failpoint("after_submitted_commit")
        return after

    def _running(self, inv: Invocation, observed: Observation | None) -> Invocation:
        assert observed is not None
        if isinstance(observed, BackendError):
            return inv  # the caller decides how long an unreachable scheduler is tolerated
        event = terminal_event(observed, self._retry_at(inv))
        if event is not None:
            failpoint("after_terminal_observed")
            return self._record_end(inv, event)
        if observed.state in (RemoteState.NOT_FOUND, RemoteState.UNKNOWN):
            return self._unknown(inv, describe(observed))
        return inv

    def _record_end(self, inv: Invocation, event: Event) -> Invocation:
        after = self._commit(inv, event)
        if isinstance(event, InfraFailed):
            failpoint("after_infra_failed_commit")
        else:
            failpoint("after_finished_commit")
        return after

    def _collect(self, inv: Invocation) -> Invocation:
        if inv.cancel_requested and inv.failure_class is not FailureClass.CANCELLED:
            # Asked to stop while results come home: stop collecting, keep the job's exit code.
            return self._commit(inv, Cancelled("cancelled during collection"))
        ref, backend = self.job_ref(inv), self.backend(inv)
        # Logs and artifacts come home before anything may clean the remote directory.
        spool_logs(self.journal, backend, ref)
        patterns = list(inv.options.get("artifacts", []))
        collected = backend.collect(ref)
        artifacts = collect_artifacts(self.journal, backend, ref, patterns)
        evidence = "; ".join(text for text in (collected, artifacts) if text)
        failpoint("after_collect_effect")
        assert inv.failure_class is not None
        outcome = OUTCOME_OF[inv.failure_class]
        after = self._commit(inv, Collected(outcome, inv.exit_code, evidence))
        failpoint("after_done_commit")
        return after

    def _retrying(self, inv: Invocation) -> Invocation:
        if inv.cancel_requested:
            return self._commit(inv, Cancelled("cancelled between attempts"))
        assert inv.failure_class is not None
        if inv.retries > inv.max_retries:
            return self._commit(inv, RetryBudgetSpent(inv.failure_class, inv.retries - 1))
        if inv.not_before and datetime.fromisoformat(inv.not_before) > utc_now():
            return inv
        return self._intend(inv, inv.attempt + 1)

    def _unresolved(self, inv: Invocation, observed: Observation | None) -> Invocation:
        assert observed is not None
        if isinstance(observed, BackendError):
            return inv
        event = terminal_event(observed, self._retry_at(inv))
        if event is not None:
            return self._record_end(inv, event)
        if observed.state in (RemoteState.PENDING, RemoteState.RUNNING) and observed.job_id:
            return self._submitted(inv, observed.job_id, f"reattached: {describe(observed)}")
        never_submitted = observed.state is RemoteState.NOT_FOUND and not self._had_job_id(inv)
        if never_submitted:
            if inv.cancel_requested:
                return self._commit(inv, Cancelled(f"proven never submitted: {describe(observed)}"))
            return self._infra_failed(
                inv,
                FailureClass.TRANSPORT_LOST,
                f"proven absent after an unknown outcome: {describe(observed)}",
            )
        return inv  # still unknown: nothing is written, so reconcile stays idempotent

    def _had_job_id(self, inv: Invocation) -> bool:
        return self.job_ref(inv).job_id is not None

    def _unknown(self, inv: Invocation, observation: str) -> Invocation:
        after = self._commit(inv, OutcomeUnknown(observation))
        failpoint("after_unknown_commit")
        return after

    def _infra_failed(self, inv: Invocation, failure: FailureClass, observation: str) -> Invocation:
        return self._record_end(inv, InfraFailed(failure, observation, self._retry_at(inv)))

    def _retry_at(self, inv: Invocation) -> str:
        return iso(next_attempt_at(inv.retries + 1, self.retry, utc_now()))

    def mark_unknown(self, inv: Invocation, observation: str) -> Invocation:
        """Give up proving the outcome for now (the scheduler stayed unreachable)."""
        if inv.state in (JobState.SUBMITTING, JobState.RUNNING):
            return self._unknown(inv, observation)
        return inv

    def spool(self, inv: Invocation) -> int:
        """Copy new log bytes of the current attempt home (remote adapters only)."""
        if inv.attempt < 1:
            return 0
        return spool_logs(self.journal, self.backend(inv), self.job_ref(inv))

    def log_paths(self, inv: Invocation) -> tuple[Path, Path]:
        return self.backend(inv).log_paths(self.job_ref(inv))

    def all_log_paths(self, inv: Invocation) -> list[tuple[Path, Path]]:
        """The log files of every attempt, oldest first."""
        backend = self.backend(inv)
        return [
            backend.log_paths(
                JobRef(
                    a.job_name,
                    a.job_id,
                    Path(inv.run_dir) / str(a.attempt),
                    None,
                    inv.id,
                    a.attempt,
                )
            )
            for a in self.journal.attempts(inv.id)
        ]

    # -- cancellation -----------------------------------------------------------------------

    def request_cancel(self, inv: Invocation, by: str) -> Invocation:
        """Commit the cancel intent (or settle at once when nothing can be running)."""
        while True:
            try:
                if inv.state in (JobState.PREPARED, JobState.RETRYING):
                    return self._commit(inv, Cancelled(f"cancelled by {by}; nothing running"))
                if inv.state is JobState.DONE or inv.cancel_requested:
                    return inv
                after = self._commit(inv, CancelRequested(by))
                failpoint("after_cancel_intent")
                return after
            except StaleState:
                inv = self.journal.get(inv.id)

    def send_cancel(self, inv: Invocation) -> None:
        """The cancel effect; only ever called once CancelRequested is committed."""
        if inv.cancel_requested and inv.state in (
            JobState.SUBMITTING,
            JobState.RUNNING,
            JobState.UNRESOLVED,
        ):
            self.backend(inv).cancel(self.job_ref(inv))
            failpoint("after_cancel_effect")

    def abandon_unresolved(self, inv: Invocation, observation: str) -> Invocation:
        """An operator's cancel of an invocation whose outcome stays unknown."""
        return self._commit(inv, Cancelled(f"cancelled while unresolved: {observation}"))
