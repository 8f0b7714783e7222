"""The partitions' limits a request must fit, and Slurm's refusals read as the request's fault.
The oracles are written out here (real `sinfo` output and sbatch messages of the local Slurm
22.05 cluster), never read from the module's constants."""

from __future__ import annotations

import pytest

from vibesys.adapters.slurm.limits import (
    BatchTime,
    PartitionLimits,
    batch_time,
    minutes_asked,
    parse_partition_limits,
    sbatch_sizing,
    slurm_refusal,
    time_refusal,
)
from vibesys.adapters.slurm.parse import UnparseableOutput

#: `sinfo -h -o '%P %l'` on the local cluster.
SINFO = "main* 30:00\npriority 2:00:00\nshort 5:00\n"


def test_the_limits_as_sinfo_prints_them() -> None:
    limits = parse_partition_limits(SINFO)
    assert limits.minutes == {"main": 30, "priority": 120, "short": 5}
    assert limits.names == ("main", "priority", "short")
    assert limits.default == "main"
    odd = parse_partition_limits("gpu infinite\nbig n/a\nbig n/a\n")
    assert odd == PartitionLimits({"gpu": None}, ("gpu", "big"), None)
    with pytest.raises(UnparseableOutput):
        parse_partition_limits("main* 30:00 extra\n")


@pytest.mark.parametrize(
    ("minutes", "partitions", "refused"),
    [
        (30, (), None),  # the default partition, at its limit
        (31, (), "--time 31 exceeds partition main's MaxTime (30 min)"),
        (60, ("priority",), None),
        (121, ("priority",), "--time 121 exceeds partition priority's MaxTime (120 min)"),
        (60, ("main", "priority"), None),  # Slurm may start it in the one that fits
        (
            200,
            ("short", "priority"),
            "--time 200 exceeds the MaxTime of every partition it may use (short MaxTime 5 "
            "min, priority MaxTime 120 min)",
        ),
        # Not proven: a partition sinfo does not list is Slurm's to refuse.
        (200, ("nosuch",), None),
        (200, ("short", "nosuch"), None),
    ],
)
def test_a_time_is_refused_only_when_no_partition_it_may_use_allows_it(
    minutes: int, partitions: tuple[str, ...], refused: str | None
) -> None:
    limits = parse_partition_limits(SINFO)
    assert time_refusal(minutes, partitions, limits, f"--time {minutes}") == refused


def test_unlimited_no_limit_and_no_default_prove_nothing() -> None:
    limits = parse_partition_limits("gpu infinite\nbig n/a\nsmall 10\n")
    assert time_refusal(10**6, ("gpu",), limits, "t") is None
    assert time_refusal(10**6, ("big",), limits, "t") is None
    assert time_refusal(10**6, (), limits, "t") is None  # no default partition to compare
    refused = time_refusal(11, ("small",), limits, "t")
    assert refused == "t exceeds partition small's MaxTime (10 min)"


def test_a_started_minute_counts() -> None:
    assert [minutes_asked(s) for s in (60, 61, 1800, 1830, 99 * 86400)] == [1, 2, 30, 31, 142560]


def test_the_site_sizing_in_sbatch_arguments_last_one_wins() -> None:
    assert sbatch_sizing(("--account=lab",)) == ((), None)
    assert sbatch_sizing(("-pmain", "--time=10", "--partition=a,b", "-t1:00:00")) == (
        ("a", "b"),
        "1:00:00",
    )


def test_the_time_a_batch_job_asks_and_whose_it_is() -> None:
    assert batch_time(None, ("main",), ()) is None  # the partition's default time
    assert batch_time(45, ("main",), ("--account=lab",)) == BatchTime(
        45, ("main",), "--time 45", False
    )
    # sbatch_arguments come last in the script: their time and partitions are the job's.
    assert batch_time(10, ("main",), ("-ppriority", "--time=2:00:30")) == BatchTime(
        121, ("priority",), "[slurm] sbatch_arguments --time=2:00:30", True
    )
    assert batch_time(None, (), ("--time=45",)) == BatchTime(
        45, (), "[slurm] sbatch_arguments --time=45", True
    )
    assert batch_time(10, (), ("--time=soon",)) is None  # sbatch refuses it itself
    assert batch_time(10, (), ("--time=infinite",)) is None


@pytest.mark.parametrize(
    "said",
    [
        # exactly what sbatch printed on the local cluster (stderr, rc 1)
        "sbatch: error: Batch job submission failed: Requested time limit is invalid "
        "(missing or exceeds some limit)",
        "sbatch: error: invalid partition specified: nosuch",
        "sbatch: error: Batch job submission failed: Invalid partition name specified",
        "sbatch: error: Batch job submission failed: Node count specification invalid",
        "sbatch: error: Batch job submission failed: Requested node configuration is not available",
        "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job "
        "submit limit, user's size and/or time limits)",
        "sbatch: error: Batch job submission failed: Invalid account or account/partition "
        "combination specified",
        "sbatch: error: Batch job submission failed: Invalid qos specification",
    ],
)
def test_slurms_refusals_are_the_requests_fault(said: str) -> None:
    noise = "Considered resources (1 node):\n"
    assert slurm_refusal(noise + said + "\n  \n") == said


@pytest.mark.parametrize(
    "said",
    [
        "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation",
        "sbatch: error: Slurm controller not responding, sleeping and retrying.",
        "sbatch: error: Batch job submission failed: Unable to contact slurm controller "
        "(connect failure)",
        "Failed to provision all possible launchable resources.",
        "",
    ],
)
def test_an_outage_is_no_refusal(said: str) -> None:
    assert slurm_refusal(said) is None
