"""A campaign's allocation lost under a running attempt, through the engine: preempted, it is
PREEMPTED; at its wall time, ALLOCATION_EXPIRED. Either way the attempt is retried within the
policy on a relaunched cluster, and the JobResult and `journal show` name which it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.skypilot.conftest import engine_on, job_claims
from tests.helpers.skyfake import FakeSky
from vibesys.cli.render import show
from vibesys.engine import DriveOptions, Engine, drive
from vibesys.job_result import JobStatus, result_from_journal
from vibesys.journal_schema import Invocation, LeaseState, verify_journal
from vibesys.states import FailureClass, JobState, Outcome

#: Slurm's State of the lost allocation -> the failure class of the attempt that ran in it
ENDS = [
    pytest.param("PREEMPTED", FailureClass.PREEMPTED, id="preempted"),
    pytest.param("TIMEOUT", FailureClass.ALLOCATION_EXPIRED, id="wall-time"),
]


def lose_first_attempt(
    engine: Engine, fake: FakeSky, tmp_path: Path, slurm_says: str, max_retries: int
) -> Invocation:
    """An evaluation whose first attempt runs until its allocation ends as Slurm says (a
    preemption's or a time limit's SIGTERM to the step), and whose second ends at once."""
    inv = engine.prepare(
        adapter="skypilot",
        command=["sh", "-c", 'case "$PWD" in */2/work) exit 0 ;; esac; sleep 30'],
        request=fake.request(),
        run_root=tmp_path / "runs",
        max_retries=max_retries,
    )
    inv = drive(engine, inv, DriveOptions(detach=True))
    while not job_claims(fake):
        engine.advance(inv)
    [lease] = engine.journal.clusters.cluster_leases()
    fake.control("fake-lose", lease.name, "--signal-command", "--as", slurm_says)
    return drive(engine, engine.journal.invocations.get(inv.id), DriveOptions())


@pytest.mark.parametrize(("slurm_says", "failure"), ENDS)
def test_a_lost_allocation_is_named_and_retried_on_a_relaunched_cluster(
    fake: FakeSky, tmp_path: Path, slurm_says: str, failure: FailureClass
) -> None:
    engine = engine_on(fake, tmp_path)
    inv = lose_first_attempt(engine, fake, tmp_path, slurm_says, max_retries=2)
    assert (inv.outcome, inv.attempt, inv.retries) == (Outcome.COMPLETED, 2, 1)
    journal = engine.journal
    first, second = journal.invocations.attempts(inv.id)
    assert (first.failure_class, second.failure_class) == (failure, FailureClass.COMPLETED)
    old, new = journal.clusters.cluster_leases()
    assert (old.state, old.allocation_job) == (LeaseState.LOST, "200")
    assert (new.state, new.allocation_job) == (LeaseState.UP, "201")
    assert [a.provenance["allocation_job_id"] for a in (first, second)] == ["200", "201"]
    assert journal.clusters.leases_used_by(inv.id) == [(1, old), (2, new)]
    assert len(fake.calls("launch")) == 2
    [ended] = [h for h in journal.invocations.history(inv.id) if h.event == "InfraFailed"]
    assert f"Slurm's record of allocation 200: {slurm_says}" in str(ended.evidence)
    text = show(
        inv,
        journal.invocations.attempts(inv.id),
        journal.invocations.history(inv.id),
        (),
        journal.clusters.leases_used_by(inv.id),
    )
    assert f"  1  {first.job_name}  job 1@200  {failure}" in text
    assert f"  2  {second.job_name}  job 1@201  COMPLETED" in text
    assert verify_journal(journal) == []


@pytest.mark.parametrize(("slurm_says", "failure"), ENDS)
def test_with_the_retries_spent_the_result_says_which(
    fake: FakeSky, tmp_path: Path, slurm_says: str, failure: FailureClass
) -> None:
    engine = engine_on(fake, tmp_path)
    inv = lose_first_attempt(engine, fake, tmp_path, slurm_says, max_retries=0)
    assert (inv.state, inv.outcome, inv.attempt) == (JobState.DONE, Outcome.INFRA_FAILED, 1)
    result = result_from_journal(engine.journal, inv.id)
    assert (result.status, result.failure_class) == (JobStatus(failure), failure)
    assert result.remote_job_id == "1@200" and result.provenance["allocation_job_id"] == "200"
    journal = engine.journal
    [ended] = [h for h in journal.invocations.history(inv.id) if h.event == "InfraFailed"]
    assert f"Slurm's record of allocation 200: {slurm_says}" in str(ended.evidence)
    [attempt] = journal.invocations.attempts(inv.id)
    text = show(inv, [attempt], journal.invocations.history(inv.id))
    assert f"  1  {attempt.job_name}  job 1@200  {failure}" in text
    assert f"RetryBudgetSpent  failure_class={failure} retries=0" in text
    assert len(fake.calls("launch")) == 1  # nothing retried, nothing relaunched
