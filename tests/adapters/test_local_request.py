"""The local adapter's request answers as the common `AdapterRequest` does: the same fields and
defaults, the same refusals, the same JSON in the journal (journals already written read back)
and the same schema version. The common model is the oracle."""

from __future__ import annotations

from typing import Any

import pytest

from vibesys.adapters.local_request import LocalRequest
from vibesys.adapters.registry import entry
from vibesys.adapters.requests import AdapterRequest
from vibesys.errors import ConfigError
from vibesys.strict_decode import decode


class Modelled(AdapterRequest, frozen=True, kw_only=True):
    """The common request, nothing added."""


CASES: list[dict[str, Any]] = [
    {},
    {"artifacts": []},
    {"artifacts": ["results/*.json", "x"]},
    {"job_name_prefix": "vibesys-gpu"},
    {"cancel_when_orphaned": True},
    {"artifacts": ["a"], "job_name_prefix": "p.q_r-1", "cancel_when_orphaned": False},
    {"artifacts": "a"},
    {"artifacts": [1]},
    {"artifacts": None},
    {"job_name_prefix": "two words"},
    {"job_name_prefix": "-leading"},
    {"job_name_prefix": ""},
    {"job_name_prefix": 5},
    {"cancel_when_orphaned": "yes"},
    {"cancel_when_orphaned": 1},
    {"gpus": 1},
]


@pytest.mark.parametrize("data", CASES, ids=[repr(c) for c in CASES])
def test_the_local_request_answers_as_the_common_one(data: dict[str, Any]) -> None:
    try:
        modelled: dict[str, Any] | None = decode(data, Modelled).recorded()
    except ValueError:
        modelled = None
    try:
        local: dict[str, Any] | None = decode(data, LocalRequest).recorded()
    except ValueError:
        local = None
    assert local == modelled
    assert LocalRequest.schema_version == AdapterRequest.schema_version


def test_a_recorded_request_that_does_not_fit_names_the_field() -> None:
    with pytest.raises(
        ConfigError, match="local request does not fit: gpus: Extra inputs are not permitted"
    ):
        entry("local").parse_request({"gpus": 1})
    with pytest.raises(ConfigError, match="job_name_prefix: 'no good' must be letters"):
        entry("local").parse_request({"job_name_prefix": "no good"})


def test_the_local_request_is_frozen_and_compares_by_value() -> None:
    request = decode({"artifacts": ["a"]}, LocalRequest)
    assert request == LocalRequest(artifacts=("a",)) and request != LocalRequest()
    assert hash(request) == hash(LocalRequest(artifacts=("a",)))
    assert request.backend_key() == ""
    with pytest.raises(AttributeError, match="immutable"):
        request.artifacts = ()  # type: ignore[misc]
