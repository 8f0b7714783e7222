"""A job whose process this one started (srun) is seen to end when that process ends: the
driver takes the adapter's `ended_here` before any shared round, the site's probe passes over
such a job while its process runs (a marker found a moment earlier is no reason for a round),
and one that ended unobserved does not make the next job's first round due at once. Against
the scripted shared-poll fake; the live check is tests/slurm/test_outcomes_slurm.py."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.engine.shared_poll.conftest import Clock, SharedFake, engine, running
from vibesys.adapters.base import JobRef, RemoteState, RemoteStatus, SeesItsOwnEnd
from vibesys.adapters.fake import FakeAttempt
from vibesys.journal_schema import Journal
from vibesys.states import JobState

S = RemoteState


@pytest.fixture
def clock() -> Clock:
    return Clock()


class OwnEndFake(SharedFake):
    """The shared fake whose jobs run under a process of this one (`ends` per job name)."""

    def __init__(self, attempts: list[FakeAttempt] | None = None) -> None:
        super().__init__(attempts)
        self.ends: dict[str, threading.Event] = {}

    # -- what the engine may ask of it (adapters.base.Backend) ---------------------------

    def sees_its_own_end(self) -> OwnEndFake:
        return self

    def end_signal(self, job: JobRef) -> threading.Event:
        return self.ends.setdefault(job.job_name, threading.Event())

    def ended_here(self, job: JobRef) -> RemoteStatus | None:
        if not self.end_signal(job).is_set():
            return None
        return RemoteStatus(
            job.job_name, job.job_id, S.COMPLETED, exit_code=0, observation="own process ended"
        )


def test_the_end_is_taken_from_the_own_process_before_any_round(
    journal: Journal, clock: Clock, tmp_path: Path
) -> None:
    own = OwnEndFake([FakeAttempt((S.RUNNING,))])
    assert isinstance(own, SeesItsOwnEnd)
    eng = engine(journal, own, clock, "here:1:1")
    inv = running(eng, tmp_path)
    ref = eng.adapters.job_ref(inv)
    own.ended.add(ref.job_name)  # its marker is there already: the probe would find it
    assert eng.observe(journal.invocations.get(inv.id)) is None
    assert own.probes == [] or all(ref.job_name not in p for p in own.probes)
    own.end_signal(ref).set()
    seen = eng.observe(journal.invocations.get(inv.id))
    assert seen is not None and "own process ended" in seen.evidence
    done = eng.advance(journal.invocations.get(inv.id), seen)
    assert done.state is JobState.DONE
    assert own.status_calls() == [], "no scheduler query for a job whose end was seen here"


def test_a_job_that_ended_unobserved_does_not_bring_the_next_first_round_forward(
    journal: Journal, clock: Clock, tmp_path: Path
) -> None:
    own = OwnEndFake([FakeAttempt((S.RUNNING,)), FakeAttempt((S.RUNNING,))])
    eng = engine(journal, own, clock, "here:1:1")
    first = running(eng, tmp_path)
    own.end_signal(eng.adapters.job_ref(first)).set()
    assert eng.advance(journal.invocations.get(first.id)).state is JobState.DONE
    clock.advance(60.0)
    second = running(eng, tmp_path)  # a minute later; the first is still a watched row
    assert eng.observe(journal.invocations.get(second.id)) is None
    assert own.status_calls() == [], "the new job's first round waits its initial delay"
