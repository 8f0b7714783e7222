"""Admission: the token (the GPU broker's never opens the bridge, nor the bridge's the broker),
the campaign, the workspace, the variables the operator allows, the timeout limit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vibesys.bridge.admission import Refusal, SessionPolicy
from vibesys.bridge.protocol import BridgeCall
from vibesys.broker.admission import Admission
from vibesys.broker.admission import Refusal as BrokerRefusal
from vibesys.broker.protocol import BrokerCall
from vibesys.config.slurm import AgentGpuConfig
from vibesys.service.tokens import BRIDGE_PREFIX, BROKER_PREFIX, new_token, service_of

BRIDGE_TOKEN = new_token(BRIDGE_PREFIX)
BROKER_TOKEN = new_token(BROKER_PREFIX)


def policy(workspace: str = "/ws/a", real: str = "/real/ws/a") -> SessionPolicy:
    return SessionPolicy(
        BRIDGE_TOKEN, "campaign-7", workspace, real, frozenset({"SEED"}), 600, 3600
    )


def call(**changes: Any) -> BridgeCall:
    values: dict[str, Any] = {
        "op": "evaluate",
        "token": BRIDGE_TOKEN,
        "request_id": "r-1",
        "run": "campaign-7",
        "workspace": "/ws/a",
        "argv": ("python", "eval.py"),
        "env": {"SEED": "3"},
        "artifacts": ("out/*.json",),
    }
    values.update(changes)
    return BridgeCall(**values)


def refused(req: BridgeCall) -> Refusal:
    with pytest.raises(Refusal) as caught:
        policy().admit(req, uid=1000)
    return caught.value


def test_tokens_name_their_service_and_never_repeat() -> None:
    assert BRIDGE_TOKEN.startswith("vbeval1.") and BROKER_TOKEN.startswith("vbgpu1.")
    assert service_of(BRIDGE_TOKEN) == "the evaluation bridge"
    assert service_of(BROKER_TOKEN) == "the GPU broker"
    assert service_of("plain") is None
    assert len({new_token(BRIDGE_PREFIX) for _ in range(50)}) == 50
    with pytest.raises(ValueError, match="unknown token prefix"):
        new_token("other.")


def test_an_accepted_request() -> None:
    evaluation = policy().admit(call(timeout_seconds=None), uid=1000)
    assert (evaluation.workspace, evaluation.uid, evaluation.timeout_seconds) == (
        "/ws/a",
        1000,
        600,
    )
    assert evaluation.body()["timeout_seconds"] is None
    assert evaluation.body()["effective_timeout_seconds"] == 600
    assert evaluation.body()["env"] == ["SEED"] and "3" not in repr(evaluation)


def test_the_real_path_of_the_workspace_is_the_same_workspace() -> None:
    assert policy().admit(call(workspace="/real/ws/a/"), uid=1).workspace == "/ws/a"
    assert policy().admit(call(workspace="/ws/b/../a"), uid=1).workspace == "/ws/a"


def test_a_wrong_token_is_refused() -> None:
    refusal = refused(call(token="vbeval1.other"))
    assert refusal.field == "token"
    assert (
        str(refusal) == "bad token: this bridge serves another session (check VIBESYS_EVAL_TOKEN)"
    )
    assert "other" not in str(refusal).replace("another", "")


def test_the_brokers_token_never_opens_the_bridge() -> None:
    refusal = refused(call(token=BROKER_TOKEN))
    assert str(refusal) == (
        "bad token: that is the GPU broker's token (VIBESYS_GPU_TOKEN), not this bridge's "
        "(VIBESYS_EVAL_TOKEN)"
    )


def test_the_bridges_token_never_opens_the_broker(tmp_path: Path) -> None:
    limits = AgentGpuConfig(
        partitions=("main",), max_gpus=1, max_time_minutes=10, default_time_minutes=5
    )
    broker = Admission(BROKER_TOKEN, str(tmp_path), limits, {})
    gpu_request = BrokerCall(
        token=BRIDGE_TOKEN, cwd=str(tmp_path), argv=("true",), gpus=0, time_minutes=None
    )
    with pytest.raises(BrokerRefusal) as caught:
        broker.admit(gpu_request)
    assert str(caught.value) == (
        "bad token: that is the evaluation bridge's token, not this broker's (VIBESYS_GPU_TOKEN)"
    )
    ok = broker.admit(
        BrokerCall(token=BROKER_TOKEN, cwd=str(tmp_path), argv=("true",), gpus=0, time_minutes=None)
    )
    assert ok.cwd == str(tmp_path)


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"run": "campaign-8"}, "run", "run 'campaign-8' is not this session's campaign"),
        (
            {"workspace": "/ws/b"},
            "workspace",
            "workspace /ws/b is not this session's workspace: a session evaluates only its own "
            "candidate",
        ),
        (
            {"env": {"SEED": "1", "AWS_SECRET_ACCESS_KEY": "x"}},
            "env",
            "variable AWS_SECRET_ACCESS_KEY is not one the operator lets evaluations receive "
            "(allowed: SEED)",
        ),
        (
            {"timeout_seconds": 3601},
            "timeout_seconds",
            "timeout_seconds 3601 exceeds this session's limit (3600)",
        ),
        (
            {"kind": "profile", "profiler": "nsys"},
            "profiler",
            "--profiler nsys: this session offers no such profiler (offered: none)",
        ),
    ],
)
def test_refusals_name_the_field(changes: dict[str, Any], field: str, message: str) -> None:
    refusal = refused(call(**changes))
    assert (refusal.field, str(refusal)) == (field, message)


def test_a_profile_names_a_profiler_the_session_offers() -> None:
    offering = SessionPolicy(
        BRIDGE_TOKEN, "campaign-7", "/ws/a", "/real/ws/a", profilers=frozenset({"py-spy", "early"})
    )
    evaluation = offering.admit(call(kind="profile", profiler="py-spy", env={}), uid=1000)
    assert (evaluation.kind, evaluation.profiler) == ("profile", "py-spy")
    assert evaluation.body()["profiler"] == "py-spy"
    assert "profiler" not in policy().admit(call(), uid=1000).body()
    with pytest.raises(Refusal) as caught:
        offering.admit(call(kind="profile", profiler="nsys", env={}), uid=1000)
    assert str(caught.value) == (
        "--profiler nsys: this session offers no such profiler (offered: early, py-spy)"
    )
