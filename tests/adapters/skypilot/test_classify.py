"""The classification table, case by case (pure)."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from vibesys.adapters.base import RemoteState
from vibesys.adapters.rundir.claim import Claim
from vibesys.adapters.rundir.markers import DirState
from vibesys.adapters.skypilot.classify import (
    ClusterView,
    Observed,
    classify,
    format_job_id,
    lost_allocation,
    parse_job_ref_id,
    pick,
)
from vibesys.adapters.skypilot.parse import QueueJob, SkyJobStatus

S = SkyJobStatus
UP, GONE, UNKNOWN = ClusterView.UP, ClusterView.GONE, ClusterView.UNKNOWN


def job_claim(allocation: str = "107", sky_id: str = "3") -> Claim:
    return Claim(
        "job", MappingProxyType({"kind": "job", "sky_job_id": sky_id, "slurm_job_id": allocation})
    )


FENCE = Claim("fence", MappingProxyType({"kind": "fence", "by": "host:1:2"}))


def seen(
    *,
    sky: SkyJobStatus | None = None,
    cluster: ClusterView = UP,
    exit_code: int | None = None,
    claim: Claim | None = None,
    refused: str | None = None,
    recorded: str | None = "3@107",
    allocation: str | None = "107",
    cancelled_by_us: bool = False,
    in_flight: bool = False,
    ended: str | None = None,
) -> Observed:
    queued = QueueJob(3, "vibesys-x-1", sky, 1.0, None, None) if sky is not None else None
    return Observed(
        "vibesys-x-1",
        recorded,
        queued,
        cluster,
        allocation,
        DirState(claim, exit_code, refused, None),
        cancelled_by_us,
        in_flight,
        ended,
    )


@pytest.mark.parametrize(
    ("observed", "state", "code"),
    [
        (seen(sky=S.SUCCEEDED, exit_code=0, claim=job_claim()), RemoteState.COMPLETED, 0),
        (seen(sky=S.FAILED, exit_code=3, claim=job_claim()), RemoteState.FAILED, 3),
        # The marker wins, even when the allocation ended afterwards.
        (seen(cluster=GONE, exit_code=0, claim=job_claim()), RemoteState.COMPLETED, 0),
        (seen(sky=S.FAILED, exit_code=137, claim=job_claim()), RemoteState.FAILED, 137),
        (seen(sky=S.CANCELLED, exit_code=143, claim=job_claim()), RemoteState.CANCELLED, 143),
        (seen(exit_code=143, claim=job_claim(), cancelled_by_us=True), RemoteState.CANCELLED, 143),
        # Killed by a signal as its allocation ended (scancel, wall time, node failure): the
        # infrastructure's doing, seen on the refresh or on the cluster's new allocation.
        (
            seen(cluster=GONE, exit_code=143, claim=job_claim()),
            RemoteState.ALLOCATION_EXPIRED,
            None,
        ),
        (
            seen(exit_code=143, claim=job_claim("107"), allocation="120"),
            RemoteState.ALLOCATION_EXPIRED,
            None,
        ),
        (seen(cluster=UNKNOWN, exit_code=143, claim=job_claim()), RemoteState.UNKNOWN, None),
        (seen(cluster=GONE, exit_code=3, claim=job_claim()), RemoteState.FAILED, 3),
        (seen(sky=S.PENDING), RemoteState.PENDING, None),
        (seen(sky=S.SETTING_UP), RemoteState.PENDING, None),
        (seen(sky=S.RUNNING, claim=job_claim()), RemoteState.RUNNING, None),
        (seen(sky=S.SUCCEEDED, claim=job_claim()), RemoteState.UNKNOWN, None),
        (seen(sky=S.FAILED, claim=job_claim()), RemoteState.NODE_FAIL, None),
        (seen(sky=S.FAILED_DRIVER, claim=job_claim()), RemoteState.NODE_FAIL, None),
        (seen(sky=S.FAILED_SETUP), RemoteState.LAUNCH_FAILED, None),
        (seen(sky=S.FAILED, refused="kind=fence"), RemoteState.LAUNCH_FAILED, None),
        (seen(sky=S.CANCELLED, claim=job_claim()), RemoteState.CANCELLED, None),
        (seen(cluster=GONE, claim=job_claim()), RemoteState.ALLOCATION_EXPIRED, None),
        (seen(cluster=GONE), RemoteState.ALLOCATION_EXPIRED, None),
        (seen(claim=job_claim("107"), allocation="120"), RemoteState.ALLOCATION_EXPIRED, None),
        (seen(recorded="3@107", allocation="120"), RemoteState.ALLOCATION_EXPIRED, None),
        # The cluster's allocation not seen (an empty squeue, a refresh that cleared its
        # nodes): that proves nothing about the recorded one.
        (seen(recorded="3@107", allocation=None), RemoteState.UNKNOWN, None),
        (seen(recorded=None), RemoteState.NOT_FOUND, None),
        (seen(recorded=None, cluster=GONE), RemoteState.NOT_FOUND, None),
        (seen(recorded=None, in_flight=True), RemoteState.UNKNOWN, None),
        (seen(recorded=None, cluster=UNKNOWN), RemoteState.UNKNOWN, None),
        (seen(claim=job_claim("107")), RemoteState.UNKNOWN, None),
    ],
)
def test_classification(observed: Observed, state: RemoteState, code: int | None) -> None:
    status = classify(observed)
    assert (status.state, status.exit_code) == (state, code)
    assert status.job_name == "vibesys-x-1" and status.observation


def test_a_cancel_we_asked_for_is_attributed_to_us() -> None:
    status = classify(seen(sky=S.CANCELLED, cancelled_by_us=True))
    assert status.cancelled_by == "vibesys"
    assert classify(seen(sky=S.CANCELLED)).cancelled_by is None


def test_an_ordinary_non_zero_exit_is_never_infrastructure() -> None:
    for code in (1, 2, 3, 100, 127, 255):
        status = classify(seen(sky=S.FAILED, exit_code=code, claim=job_claim()))
        assert status.state is RemoteState.FAILED and status.exit_code == code


def test_job_ids_carry_their_allocation() -> None:
    assert format_job_id(3, "107") == "3@107"
    assert parse_job_ref_id("3@107") == (3, "107")
    assert parse_job_ref_id("3@?") == (3, None)
    assert parse_job_ref_id(None) == (None, None)


def test_pick_prefers_the_claimed_then_the_recorded_then_the_newest() -> None:
    jobs = [QueueJob(n, "a", S.RUNNING, None, None, None) for n in (5, 4, 2)]
    jobs.append(QueueJob(9, "b", S.RUNNING, None, None, None))
    assert pick(jobs, "a", 4, 2) == jobs[1]
    assert pick(jobs, "a", None, 2) == jobs[2]
    assert pick(jobs, "a", None, None) == jobs[0]
    assert pick(jobs, "c", None, None) is None


def test_every_status_carries_the_claim_and_a_fence_is_seen() -> None:
    fenced = classify(seen(sky=S.FAILED, refused="kind=fence", claim=FENCE))
    assert fenced.claim is FENCE and fenced.state is RemoteState.LAUNCH_FAILED
    assert classify(seen(recorded=None, claim=FENCE)).claim is FENCE
    running = classify(seen(sky=S.RUNNING, claim=job_claim()))
    assert running.claim == job_claim() and not running.final


def test_success_without_a_marker_is_unknown_for_good() -> None:
    status = classify(seen(sky=S.SUCCEEDED, claim=job_claim()))
    assert (status.state, status.final) == (RemoteState.UNKNOWN, True)
    # An unknown view of the cluster may change: not final.
    assert not classify(seen(recorded=None, cluster=UNKNOWN)).final


#: Every way an attempt's allocation is proven lost (the table's LOST rows), with the
#: allocation Slurm is asked about.
LOST = [
    pytest.param(dict(cluster=GONE, exit_code=143, claim=job_claim()), "107", id="killed-gone"),
    pytest.param(
        dict(exit_code=143, claim=job_claim("107"), allocation="120"), "107", id="killed-new"
    ),
    pytest.param(dict(cluster=GONE, claim=job_claim()), "107", id="claimed-gone"),
    pytest.param(dict(cluster=GONE), "107", id="submitted-gone"),
    pytest.param(dict(claim=job_claim("107"), allocation="120"), "107", id="claimed-new"),
    pytest.param(dict(recorded="3@105", allocation="120"), "105", id="submitted-new"),
]

#: Slurm's State of the lost allocation -> the name of the loss. Only a preemption and a node
#: failure are told apart; the wall time, a scancel, someone's `sky down`, a state that is no
#: end, and no record at all are the allocation's expiry.
NAMED = [
    ("PREEMPTED", RemoteState.PREEMPTED),
    ("NODE_FAIL", RemoteState.NODE_FAIL),
    ("TIMEOUT", RemoteState.ALLOCATION_EXPIRED),
    ("CANCELLED", RemoteState.ALLOCATION_EXPIRED),
    ("COMPLETED", RemoteState.ALLOCATION_EXPIRED),
    ("RUNNING", RemoteState.ALLOCATION_EXPIRED),
    ("FAILED", RemoteState.ALLOCATION_EXPIRED),
    (None, RemoteState.ALLOCATION_EXPIRED),
]


@pytest.mark.parametrize(("ended", "state"), NAMED)
@pytest.mark.parametrize(("how", "allocation"), LOST)
def test_a_lost_allocation_is_named_by_slurms_record_of_it(
    how: dict[str, object], allocation: str, ended: str | None, state: RemoteState
) -> None:
    observed = seen(**how, ended=ended)  # type: ignore[arg-type]
    assert lost_allocation(observed) == allocation
    status = classify(observed)
    assert (status.state, status.exit_code, status.final) == (state, None, False)
    assert f"Slurm's record of allocation {allocation}: {ended or 'none'}" in status.observation


def test_the_lost_allocation_is_the_claims_then_the_recorded_one() -> None:
    assert lost_allocation(seen(claim=job_claim("107"), recorded="3@105")) == "107"
    assert lost_allocation(seen(recorded="3@105")) == "105"
    assert lost_allocation(seen(recorded="3@?")) is None
    assert lost_allocation(seen(recorded=None, claim=FENCE)) is None


@pytest.mark.parametrize(
    ("observed", "state"),
    [
        (seen(cluster=GONE, exit_code=0, claim=job_claim(), ended="PREEMPTED"), "COMPLETED"),
        (seen(cluster=GONE, exit_code=3, claim=job_claim(), ended="PREEMPTED"), "FAILED"),
        (seen(sky=S.RUNNING, claim=job_claim(), ended="PREEMPTED"), "RUNNING"),
        (seen(sky=S.FAILED, claim=job_claim(), ended="PREEMPTED"), "NODE_FAIL"),
        (seen(sky=S.CANCELLED, exit_code=143, claim=job_claim(), ended="PREEMPTED"), "CANCELLED"),
        (seen(cluster=UNKNOWN, exit_code=143, claim=job_claim(), ended="PREEMPTED"), "UNKNOWN"),
    ],
)
def test_slurms_record_renames_nothing_but_a_lost_allocation(
    observed: Observed, state: str
) -> None:
    assert classify(observed).state == state
