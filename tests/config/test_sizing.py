"""Requests are checked against [vibesys.agent_gpu]: defaults filled in, over-limit rejected."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vibesys.config.sizing import AskedSizing, CheckedSizing, check_sizing
from vibesys.config.slurm import AgentGpuConfig
from vibesys.errors import UsageError

LIMITS = AgentGpuConfig(
    partitions=("main", "priority"),
    max_gpus=2,
    max_time_minutes=120,
    default_time_minutes=30,
)


def test_defaults_come_from_the_config() -> None:
    assert check_sizing(AskedSizing(), LIMITS) == CheckedSizing(
        gpus=0, time_minutes=30, partitions=("main", "priority")
    )


def test_a_request_at_the_limits_is_kept_as_asked() -> None:
    checked = check_sizing(AskedSizing(gpus=2, time_minutes=120, partition="priority"), LIMITS)
    assert checked == CheckedSizing(gpus=2, time_minutes=120, partitions=("priority",))


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (AskedSizing(gpus=3), "--gpus 3 exceeds vibesys.agent_gpu.max_gpus (2)"),
        (
            AskedSizing(time_minutes=121),
            "--time 121 exceeds vibesys.agent_gpu.max_time_minutes (120)",
        ),
        (AskedSizing(time_minutes=0), "--time 0: must be at least 1 minute"),
        (AskedSizing(gpus=-1), "--gpus -1: must be 0 or more"),
        (
            AskedSizing(partition="gpu-big"),
            "--partition gpu-big is not one of vibesys.agent_gpu.partitions (main, priority)",
        ),
        (AskedSizing(partition=""), "--partition: must not be empty"),
    ],
)
def test_over_limit_requests_are_rejected_naming_the_value(
    request_: AskedSizing, message: str
) -> None:
    with pytest.raises(UsageError) as caught:
        check_sizing(request_, LIMITS)
    assert str(caught.value) == message


def test_without_limits_a_time_is_required() -> None:
    with pytest.raises(UsageError, match="--time is required"):
        check_sizing(AskedSizing(gpus=4), None)
    checked = check_sizing(AskedSizing(gpus=4, time_minutes=600, partition="x"), None)
    assert checked == CheckedSizing(gpus=4, time_minutes=600, partitions=("x",))
    assert check_sizing(AskedSizing(time_minutes=5), None).partitions == ()


def test_request_fields_are_strict() -> None:
    with pytest.raises(ValueError, match="valid integer"):
        AskedSizing.model_validate({"gpus": "2"})


@given(
    max_gpus=st.integers(1, 16),
    max_time=st.integers(1, 10_000),
    gpus=st.integers(-2, 20),
    time_minutes=st.one_of(st.none(), st.integers(-2, 12_000)),
)
def test_requests_are_never_clamped(
    max_gpus: int, max_time: int, gpus: int, time_minutes: int | None
) -> None:
    limits = AgentGpuConfig(
        partitions=("main",),
        max_gpus=max_gpus,
        max_time_minutes=max_time,
        default_time_minutes=max_time,
    )
    request = AskedSizing(gpus=gpus, time_minutes=time_minutes)
    fits = 0 <= gpus <= max_gpus and (time_minutes is None or 0 < time_minutes <= max_time)
    if not fits:
        with pytest.raises(UsageError):
            check_sizing(request, limits)
        return
    checked = check_sizing(request, limits)
    assert checked.gpus == gpus
    assert checked.time_minutes == (max_time if time_minutes is None else time_minutes)
