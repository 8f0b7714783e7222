"""A cluster's allocation against the partitions' limits, on the scripted fake `sky` (its login
node's sinfo: main 30 min (default), priority 2 hours): refused before `sky launch` when sinfo
proves no partition allows it, never asked before a reuse, and Slurm's own refusal relayed by
the launch read as the request's fault."""

from __future__ import annotations

import pytest

from tests.helpers.skyfake import FakeSky
from vibesys.adapters.leases import LeaseAction
from vibesys.adapters.skypilot.errors import LaunchRefused, SkyProfileError
from vibesys.adapters.skypilot.limits import allocation_refusal, infra_partition

SINFO = "main* 30:00\npriority 2:00:00\n"


def sinfo_calls(fake: FakeSky) -> int:
    return len(fake.calls("--sinfo"))


def test_the_partition_an_infra_names() -> None:
    assert infra_partition("slurm/site/gpu") == "gpu"
    assert infra_partition("slurm/site") is None and infra_partition("slurm") is None
    assert infra_partition("k8s/ctx/ns") is None


@pytest.mark.parametrize(
    ("infra", "time", "refused"),
    [
        ("slurm/s", "02:00:00", None),  # fits priority, which SkyPilot may pick
        (
            "slurm/s",
            "02:00:01",  # a started minute counts
            "allocation_time 02:00:01 of [profiles.p] exceeds the MaxTime of every partition "
            "it may use (main MaxTime 30 min, priority MaxTime 120 min)",
        ),
        ("slurm/s/main", "00:30:00", None),
        (
            "slurm/s/main",
            "00:31:00",
            "allocation_time 00:31:00 of [profiles.p] exceeds partition main's MaxTime (30 min)",
        ),
        ("slurm/s/gpu", "99-00:00:00", None),  # not listed: Slurm's to refuse
        ("kubernetes/ctx", "99-00:00:00", None),  # no Slurm partitions at all
    ],
)
def test_the_allocation_against_the_partitions(infra: str, time: str, refused: str | None) -> None:
    assert allocation_refusal("p", infra, time, SINFO) == refused


def test_a_launch_beyond_every_partition_is_refused_before_sky_launch(fake_sky: FakeSky) -> None:
    backend = fake_sky.backend(allocation_time="99-00:00:00")
    with pytest.raises(SkyProfileError) as refused:
        backend.plan_lease()
    assert str(refused.value).endswith(
        "(main MaxTime 30 min, priority MaxTime 120 min): nothing launched"
    )
    assert not refused.value.retryable and not refused.value.maybe_submitted
    assert "lower allocation_time of [profiles.test]" in refused.value.fix
    assert fake_sky.calls("launch") == []


def test_sinfo_is_asked_once_per_launch_and_never_for_a_reuse(fake_sky: FakeSky) -> None:
    backend = fake_sky.backend()
    plan = backend.plan_lease()
    assert plan.action is LeaseAction.LAUNCH and sinfo_calls(fake_sky) == 1
    backend.launch(plan)
    assert backend.plan_lease().action is LeaseAction.REUSE
    assert sinfo_calls(fake_sky) == 1


def test_a_failed_sinfo_proves_nothing_and_slurms_refusal_is_launch_refused(
    fake_sky: FakeSky,
) -> None:
    fake_sky.control("fake-sinfo", "")
    fake_sky.control("fake-maxtime", "10")
    backend = fake_sky.backend()  # 20 minutes
    plan = backend.plan_lease()
    with pytest.raises(LaunchRefused) as refused:
        backend.launch(plan)
    assert str(refused.value) == (
        f"Slurm refused the allocation of cluster {backend.cluster}: sbatch: error: Batch job "
        "submission failed: Requested time limit is invalid (missing or exceeds some limit)"
    )
    assert not refused.value.retryable and not refused.value.maybe_submitted
    assert fake_sky.cluster_state(backend.cluster) is None, "nothing launched"
