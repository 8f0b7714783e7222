"""Requests are checked against [vibesys.agent_gpu]: defaults filled in, over-limit rejected."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vibesys.config import AgentGpuConfig, CheckedRequest, SlurmRequest, check_request
from vibesys.errors import UsageError

LIMITS = AgentGpuConfig(
    partitions=("main", "priority"),
    max_gpus=2,
    max_time_minutes=120,
    default_time_minutes=30,
)


def test_defaults_come_from_the_config() -> None:
    assert check_request(SlurmRequest(), LIMITS) == CheckedRequest(
        gpus=0, time_minutes=30, partitions=("main", "priority")
    )


def test_a_request_at_the_limits_is_kept_as_asked() -> None:
    checked = check_request(SlurmRequest(gpus=2, time_minutes=120, partition="priority"), LIMITS)
    assert checked == CheckedRequest(gpus=2, time_minutes=120, partitions=("priority",))


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (SlurmRequest(gpus=3), "--gpus 3 exceeds vibesys.agent_gpu.max_gpus (2)"),
        (
            SlurmRequest(time_minutes=121),
            "--time 121 exceeds vibesys.agent_gpu.max_time_minutes (120)",
        ),
        (SlurmRequest(time_minutes=0), "--time 0: must be at least 1 minute"),
        (SlurmRequest(gpus=-1), "--gpus -1: must be 0 or more"),
        (
            SlurmRequest(partition="gpu-big"),
            "--partition gpu-big is not one of vibesys.agent_gpu.partitions (main, priority)",
        ),
        (SlurmRequest(partition=""), "--partition: must not be empty"),
    ],
)
def test_over_limit_requests_are_rejected_naming_the_value(
    request_: SlurmRequest, message: str
) -> None:
    with pytest.raises(UsageError) as caught:
        check_request(request_, LIMITS)
    assert str(caught.value) == message


def test_without_limits_a_time_is_required() -> None:
    with pytest.raises(UsageError, match="--time is required"):
        check_request(SlurmRequest(gpus=4), None)
    checked = check_request(SlurmRequest(gpus=4, time_minutes=600, partition="x"), None)
    assert checked == CheckedRequest(gpus=4, time_minutes=600, partitions=("x",))
    assert check_request(SlurmRequest(time_minutes=5), None).partitions == ()


def test_request_fields_are_strict() -> None:
    with pytest.raises(ValueError, match="valid integer"):
        SlurmRequest.model_validate({"gpus": "2"})


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
    request = SlurmRequest(gpus=gpus, time_minutes=time_minutes)
    fits = 0 <= gpus <= max_gpus and (time_minutes is None or 0 < time_minutes <= max_time)
    if not fits:
        with pytest.raises(UsageError):
            check_request(request, limits)
        return
    checked = check_request(request, limits)
    assert checked.gpus == gpus
    assert checked.time_minutes == (max_time if time_minutes is None else time_minutes)
