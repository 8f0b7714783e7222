"""FakeBackend: a scripted, in-memory adapter for tests and examples. It records every call, so
a test can assert, for instance, that a crash never led to a second submit.

It keeps the claim protocol like the real adapters: a submitted job claims its attempt (unless
its script says it stalls before that), and `fence()` claims an unclaimed attempt for nobody;
a job whose attempt is fenced never runs. `FAKE_ENTRY` registers it (`register(FAKE_ENTRY)`)."""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from msgspec import Struct

from vibesys.adapters.base import (
    ArtifactInfo,
    Backend,
    JobRef,
    RemoteState,
    RemoteStatus,
    Sink,
    Submission,
    SubmitReceipt,
)
from vibesys.adapters.registry import AdapterEntry
from vibesys.adapters.requests import AdapterRequest
from vibesys.adapters.rundir.claim import Claim
from vibesys.errors import BackendError
from vibesys.osutil.layout import log_paths


class FakeAttempt(Struct):
    """How one submitted attempt behaves: the states its status rounds report, in order (the
    last one repeats), or an error its submit raises."""

    states: Sequence[RemoteState] = (RemoteState.RUNNING, RemoteState.COMPLETED)
    exit_code: int | None = 0
    submit_error: BackendError | None = None
    #: when the submit error is raised, whether the job was queued all the same
    submitted_despite_error: bool = False
    #: whether the job claims its attempt at once (False: it stalls before its claim, and
    #: claims only when `FakeBackend.wake()` is called, unless a fence got there first)
    claims: bool = True


class _Job(Struct):
    name: str
    job_id: str
    script: FakeAttempt
    rounds: int = 0
    cancelled: bool = False
    #: the state its last status round reported
    last: RemoteState | None = None
    #: the parent's job it waits on, until that job completes (Slurm's afterok)
    after_job: str | None = None


class FakeBackend(Backend):
    """A scripted scheduler in memory: each submission plays the next `FakeAttempt`."""

    def __init__(self, attempts: list[FakeAttempt] | None = None, name: str = "fake") -> None:
        self.attempts = attempts if attempts is not None else []
        self.name = name
        self.calls: list[tuple[str, str]] = []
        self.jobs: dict[str, _Job] = {}
        #: status() raises this while set (an unreachable scheduler)
        self.status_error: BackendError | None = None
        #: remote log bytes per (job name, stream); tests append to them while a job "runs"
        self.logs: dict[tuple[str, str], bytearray] = {}
        #: remote files per job name (path relative to the job's directory -> bytes)
        self.files: dict[str, dict[str, bytes]] = {}
        #: bytes served instead of a file's real content (a tampered download)
        self.tampered: dict[str, bytes] = {}
        #: claims by job name: kind "job" (the job's) or "fence" (the engine's)
        self.claims: dict[str, Claim] = {}
        #: jobs the scheduler does not show (forgotten, or not yet visible): status reports
        #: NOT_FOUND with whatever claim the attempt holds, as the Slurm adapter does
        self.hidden: set[str] = set()
        #: jobs whose command actually ran (claimed by the job itself)
        self.ran: list[str] = []
        #: the parent's job each job was submitted to wait on
        self.waits_on: dict[str, str | None] = {}
        #: how a dependency kill is shown (state, cancelled by): None, as squeue shows it
        #: (DEPENDENCY_NEVER_SATISFIED); (CANCELLED, None), as sacct keeps it once squeue has
        #: forgotten the job; (CANCELLED, "1000"), as a user's scancel
        self.dependency_kill_shown_as: tuple[RemoteState, str | None] | None = None

    # -- what the engine may ask of it (adapters.base.Backend) ---------------------------

    def remote_files(self) -> FakeBackend:
        return self

    def submit(self, submission: Submission[Any]) -> SubmitReceipt:
        self.calls.append(("submit", submission.job_name))
        after_job = None
        if isinstance(submission.request, FakeRequest) and submission.request.after:
            self.waits_on[submission.job_name] = after_job = submission.after_job
        index = sum(1 for kind, _ in self.calls if kind == "submit") - 1
        script = self.attempts[index] if index < len(self.attempts) else FakeAttempt()
        if script.submit_error is None or script.submitted_despite_error:
            job_id = str(1000 + len(self.jobs))
            self.jobs[submission.job_name] = _Job(
                submission.job_name, job_id, script, after_job=after_job
            )
            if script.claims and after_job is None:
                self._claim(submission.job_name)
        if script.submit_error is not None:
            raise script.submit_error
        return SubmitReceipt(
            self.jobs[submission.job_name].job_id, f"fake job {submission.job_name}"
        )

    def status(self, jobs: Sequence[JobRef]) -> dict[str, RemoteStatus]:
        self.calls.append(("status", ",".join(j.job_name for j in jobs)))
        if self.status_error is not None:
            raise self.status_error
        return {job.job_name: self._status_of(job) for job in jobs}

    def _claim(self, name: str) -> bool:
        if name in self.claims:
            return False
        self.claims[name] = Claim("job", {"kind": "job", "fake_job_id": self.jobs[name].job_id})
        self.ran.append(name)
        return True

    def wake(self, name: str) -> bool:
        """A stalled job resumes and tries to claim its attempt; False when it was fenced."""
        return self._claim(name)

    def fence(self, job: JobRef, text: str) -> Claim:
        self.calls.append(("fence", job.job_name))
        if self.status_error is not None:
            raise self.status_error
        claim = self.claims.setdefault(job.job_name, Claim("fence", {"kind": "fence"}, text))
        if claim.fenced and job.job_name in self.jobs:
            self.jobs[job.job_name].cancelled = True
        return claim

    def _status_of(self, ref: JobRef) -> RemoteStatus:
        job = self.jobs.get(ref.job_name)
        claim = self.claims.get(ref.job_name)
        if claim is not None and claim.fenced:
            return RemoteStatus(
                ref.job_name, None, RemoteState.NOT_FOUND, observation="fenced", claim=claim
            )
        if job is None or ref.job_name in self.hidden:
            return RemoteStatus(
                ref.job_name, None, RemoteState.NOT_FOUND, observation="no job", claim=claim
            )
        if claim is None and job.after_job is not None:
            return self._waiting(job)
        if claim is None:
            return RemoteStatus(
                job.name, job.job_id, RemoteState.PENDING, observation="fake: not yet claimed"
            )
        if job.cancelled:
            return RemoteStatus(
                job.name,
                job.job_id,
                RemoteState.CANCELLED,
                exit_code=143,
                cancelled_by="vibesys",
                observation="fake: cancelled",
            )
        states = job.script.states
        state = states[min(job.rounds, len(states) - 1)]
        job.rounds += 1
        job.last = state
        code = (
            job.script.exit_code if state in (RemoteState.COMPLETED, RemoteState.FAILED) else None
        )
        return RemoteStatus(
            job.name,
            job.job_id,
            state,
            exit_code=code,
            observation=f"fake: {state} round {job.rounds}",
        )

    def _waiting(self, job: _Job) -> RemoteStatus:
        """A job that waits on its parent's job, as Slurm keeps it with `afterok` and
        `--kill-on-invalid-dep=yes`: it starts (claims) once that job has completed, and is
        killed, never started, once it has ended otherwise (as its last round showed)."""
        parent = next((j for j in self.jobs.values() if j.job_id == job.after_job), None)
        last = None if parent is None else parent.last
        if last is RemoteState.COMPLETED and not job.cancelled:
            job.after_job = None
            self._claim(job.name)
            return self._status_of(JobRef(job.name, job.job_id, Path()))
        ended = last is not None and last not in (RemoteState.PENDING, RemoteState.RUNNING)
        if job.cancelled or ended or (parent is not None and parent.cancelled):
            state, by = RemoteState.DEPENDENCY_NEVER_SATISFIED, None
            if job.cancelled:
                state = RemoteState.CANCELLED
            elif self.dependency_kill_shown_as is not None:
                state, by = self.dependency_kill_shown_as
            return RemoteStatus(
                job.name,
                job.job_id,
                state,
                cancelled_by=by,
                observation=f"fake: {state}",
                never_started=state is RemoteState.CANCELLED,
            )
        return RemoteStatus(
            job.name, job.job_id, RemoteState.PENDING, observation="fake: waits on its parent"
        )

    def cancel(self, job: JobRef) -> None:
        self.calls.append(("cancel", job.job_name))
        if job.job_name in self.jobs:
            self.jobs[job.job_name].cancelled = True

    def collect(self, job: JobRef) -> str:
        self.calls.append(("collect", job.job_name))
        return "fake: nothing to collect"

    def log_paths(self, job: JobRef) -> tuple[Path, Path]:
        return log_paths(job.attempt_dir)

    def poll_interval(self, age_seconds: float) -> float:
        return 0.0

    def read_log(self, job: JobRef, stream: str, offset: int, sink: Sink) -> int:
        self.calls.append(("read_log", f"{job.job_name}:{stream}@{offset}"))
        data = bytes(self.logs.get((job.job_name, stream), b""))[offset:]
        sink.write(data)
        return len(data)

    def list_artifacts(
        self, job: JobRef, patterns: Sequence[str]
    ) -> tuple[list[ArtifactInfo], list[str]]:
        files = self.files.get(job.job_name, {})
        found: dict[str, ArtifactInfo] = {}
        missing = []
        for pattern in patterns:
            matched = sorted(p for p in files if fnmatch.fnmatchcase(p, pattern))
            if not matched:
                missing.append(pattern)
            for path in matched:
                body = files[path]
                found[path] = ArtifactInfo(path, len(body), hashlib.sha256(body).hexdigest())
        return list(found.values()), missing

    def fetch_artifact(self, job: JobRef, path: str, sink: Sink) -> None:
        self.calls.append(("fetch", path))
        sink.write(self.tampered.get(path, self.files[job.job_name][path]))

    def submits(self) -> list[str]:
        return [name for kind, name in self.calls if kind == "submit"]


class FakeRequest(AdapterRequest, frozen=True, kw_only=True):
    """The common request, and a parent to run after (as sbatch's `--after`), for tests."""

    after: str | None = None
    #: the parent's job this submission waits on (set by the engine for one submission)
    after_job: str | None = None

    def runs_after(self) -> str | None:
        return self.after

    def recorded_parent_job(self) -> str | None:
        return self.after_job if self.after else None


#: The registry's names for this adapter's request model and request builder.
Request = FakeRequest


def make_request(adapter: str, values: Mapping[str, Any]) -> FakeRequest:
    return FakeRequest(artifacts=tuple(values.get("artifact") or ()))


def build(request: FakeRequest) -> FakeBackend:
    return FakeBackend()


#: `vibesys.adapters.registry.register(FAKE_ENTRY)` makes it an adapter like the others.
FAKE_ENTRY = AdapterEntry("fake", "scripted, in memory (tests)", "vibesys.adapters.fake")
