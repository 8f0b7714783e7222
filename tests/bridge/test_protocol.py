"""The bridge's wire protocol: strict requests (unknown and operator-only fields refused by
name), replies that round-trip, and arbitrary bytes never raising anything but ProtocolError."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vibesys.bridge.protocol import (
    FORBIDDEN_FIELDS,
    MAX_CALL_BYTES,
    BridgeCall,
    LineDecoder,
    LineTooLong,
    ProtocolError,
    Resume,
    decode_call,
    encode_call,
    first_difference,
    refusal_field,
)
from vibesys.bridge.replies import (
    Accepted,
    Busy,
    Cancelling,
    Capabilities,
    Heartbeat,
    Output,
    Queued,
    Refused,
    Result,
    Started,
    Stopping,
    decode_reply,
    encode_reply,
)


def body(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "version": 1,
        "op": "evaluate",
        "token": "vbeval1.x",
        "request_id": "r-1",
        "run": "campaign-7",
        "workspace": "/ws/cand-a",
        "kind": "accuracy",
        "argv": ["python", "eval.py"],
        "timeout_seconds": 600,
        "env": {"SEED": "1"},
        "artifacts": ["results/*.json"],
        "resume": {"attempt": 1, "stdout": 10, "stderr": 0},
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not DROP}


DROP = object()


def decode(data: dict[str, Any]) -> BridgeCall:
    return decode_call(json.dumps(data).encode())


def refusal(data: dict[str, Any]) -> tuple[str | None, str]:
    with pytest.raises(ProtocolError) as caught:
        decode(data)
    return refusal_field(caught.value), str(caught.value)


def test_a_full_request_decodes() -> None:
    request = decode(body())
    assert request.op == "evaluate"
    assert (request.request_id, request.run, request.workspace) == (
        "r-1",
        "campaign-7",
        "/ws/cand-a",
    )
    assert request.argv == ("python", "eval.py") and request.timeout_seconds == 600
    assert dict(request.env) == {"SEED": "1"} and request.artifacts == ("results/*.json",)
    assert request.resume == Resume(1, 10, 0)
    assert "vbeval1.x" not in repr(request) and "'1'" not in repr(request)


def test_optional_fields_may_be_left_out() -> None:
    request = decode(body(env=DROP, artifacts=DROP, resume=DROP, timeout_seconds=None))
    assert (dict(request.env), request.artifacts, request.resume) == ({}, (), Resume())
    assert request.timeout_seconds is None


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("host", "host"),
        ("account", "account"),
        ("partition", "partition"),
        ("profile", "profile"),
        ("adapter", "adapter"),
        ("mount_path", "mount path"),
        ("journal", "journal"),
        ("gpus", "resources"),
    ],
)
def test_each_operator_only_field_is_refused_with_the_reason(name: str, what: str) -> None:
    field, message = refusal(body(**{name: "x"}))
    assert field == name
    assert message == (
        f"request: {name!r} is not the sandbox's to choose: the session's operator "
        f"configuration decides the {what}; remove it"
    )


def test_the_forbidden_table_covers_the_issue_list() -> None:
    for name in ("host", "account", "partition", "profile", "adapter", "mount_path", "journal"):
        assert name in FORBIDDEN_FIELDS


def test_an_operator_only_field_is_refused_whatever_the_op() -> None:
    assert refusal({"version": 1, "op": "nope", "token": "t", "partition": "gpu"})[0] == "partition"


@pytest.mark.parametrize(
    ("changes", "field", "needle"),
    [
        ({"surprise": 1}, "surprise", "unknown field 'surprise' for op 'evaluate'"),
        ({"argv": DROP}, "argv", "missing field 'argv'"),
        ({"version": 2}, "version", "unsupported protocol version 2"),
        ({"op": "run"}, "op", "'op' must be one of evaluate, cancel, capabilities"),
        ({"kind": "lint"}, "kind", "'kind' must be one of accuracy, benchmark, profile"),
        ({"kind": "profile"}, "profiler", "a profile names its 'profiler'"),
        ({"profiler": "py-spy"}, "profiler", "'profiler' is for 'kind': 'profile' only"),
        ({"kind": "profile", "profiler": "a b"}, "profiler", "must be a profiler's name"),
        ({"kind": "profile", "profiler": 1}, "profiler", "must be a profiler's name"),
        ({"argv": []}, "argv", "non-empty list of strings"),
        ({"argv": ["", "x"]}, "argv", "the program not ''"),
        ({"workspace": "rel/dir"}, "workspace", "absolute path"),
        ({"request_id": "a b"}, "request_id", "'request_id' must be"),
        ({"run": "../x"}, "run", "'run' must be"),
        ({"timeout_seconds": 0}, "timeout_seconds", "integer from 1 to"),
        ({"timeout_seconds": True}, "timeout_seconds", "integer from 1 to"),
        ({"env": {"A B": "x"}}, "env", "is not a variable name"),
        ({"env": {"A": 1}}, "env", "must be a string"),
        ({"artifacts": ["../secret"]}, "artifacts", "relative glob inside the workspace"),
        ({"artifacts": ["/etc/passwd"]}, "artifacts", "relative glob inside the workspace"),
        ({"artifacts": ["a/../../b"]}, "artifacts", "relative glob inside the workspace"),
        ({"artifacts": [""]}, "artifacts", "relative glob inside the workspace"),
        ({"resume": {"attempt": -1}}, "resume", "integers from 0 to"),
        ({"resume": {"stdout": 2**63}}, "resume", "integers from 0 to 9007199254740992"),
        ({"request_id": "r-1\n"}, "request_id", "'request_id' must be"),
        ({"request_id": "r\n-1"}, "request_id", "'request_id' must be"),
        ({"run": "c\n"}, "run", "'run' must be"),
        ({"env": {"A\n": "x"}}, "env", "is not a variable name"),
        ({"resume": {"offset": 1}}, "resume", "{attempt, stdout, stderr}"),
        ({"token": ""}, "token", "non-empty ASCII string"),
    ],
)
def test_bad_fields_are_refused_by_name(changes: dict[str, Any], field: str, needle: str) -> None:
    named, message = refusal(body(**changes))
    assert named == field and needle in message, message


SECRET = "vbeval1.0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(
    "changes",
    [
        {SECRET: 1},
        {"request_id": SECRET + "\n"},
        {"run": "../" + SECRET},
        {"workspace": SECRET},
        {"env": {SECRET + " x": "1"}},
        {"env": {"A": SECRET + "\0"}},
        {"artifacts": ["/" + SECRET]},
        {"kind": SECRET},
        {"op": SECRET},
        {"resume": {SECRET: 1}},
        {"version": SECRET},
    ],
)
def test_no_refusal_repeats_a_secret_wherever_it_was_put(changes: dict[str, Any]) -> None:
    """A token or a variable's value pasted into the wrong field is never echoed back: not in
    the message, not as the field's name."""
    named, message = refusal(body(**changes))
    assert SECRET not in message and SECRET not in str(named), (named, message)


def test_an_integer_of_thousands_of_digits_is_refused_in_one_line() -> None:
    line = json.dumps(body()).replace('"timeout_seconds": 60', '"timeout_seconds": ' + "9" * 5000)
    assert "9" * 5000 in line
    with pytest.raises(ProtocolError) as caught:
        decode_call(line.encode())
    assert str(caught.value) == "malformed message: an integer of more than 30 digits"


def test_cancel_and_capabilities_take_only_their_fields() -> None:
    cancel = {"version": 1, "op": "cancel", "token": "t", "request_id": "r", "run": "c"}
    assert decode({**cancel, "workspace": "/w"}).op == "cancel"
    assert refusal({**cancel, "workspace": "/w", "argv": ["x"]})[0] == "argv"
    assert decode({"version": 1, "op": "capabilities", "token": "t"}).op == "capabilities"
    assert refusal({"version": 1, "op": "capabilities", "token": "t", "run": "c"})[0] == "run"


def test_requests_round_trip() -> None:
    request = decode(body())
    assert decode_call(encode_call(request).rstrip(b"\n")) == request
    profile = decode(body(kind="profile", profiler="py-spy"))
    assert (profile.kind, profile.profiler, request.profiler) == ("profile", "py-spy", None)
    assert decode_call(encode_call(profile).rstrip(b"\n")) == profile
    assert profile.identity()["profiler"] == "py-spy"


def test_identity_ignores_the_token_values_and_resume() -> None:
    one = decode(body()).identity()
    other = decode(body(token="other", env={"SEED": "2"}, resume=DROP)).identity()
    assert first_difference(one, other) is None
    assert first_difference(one, decode(body(argv=["python", "b.py"])).identity()) == "argv"
    assert first_difference(one, decode(body(workspace="/ws/b")).identity()) == "workspace"
    assert first_difference(one, decode(body(env={"OTHER": "1"})).identity()) == "env"


def test_an_oversized_line_is_refused_as_soon_as_it_is() -> None:
    decoder = LineDecoder(MAX_CALL_BYTES)
    with pytest.raises(LineTooLong, match=f"exceeds {MAX_CALL_BYTES} bytes"):
        decoder.feed(b"x" * (MAX_CALL_BYTES + 1))


REPLIES = [
    Accepted("1a2b", "r-1", True),
    Accepted("1a2b", "r-1", False, 0.25),
    Heartbeat(),
    Busy("the bridge is busy (64 connections open, its limit); try again", 1.0),
    Queued(2, "two ahead"),
    Started(1, "vibesys-c-1234abcd", "3@200"),
    Started(2, None, None),
    Output(1, "stderr", 4096, b"\x00\xff bytes"),
    Result({"status": "COMPLETED", "exit_code": 0}, 0),
    Stopping("the session is shutting down"),
    Cancelling("cancel requested"),
    Capabilities({"backend": "slurm", "nodes": 1}),
    Capabilities({"backend": "local"}, "# Runtime notes\n"),
    Refused("bad token", "token"),
    Refused("busy"),
]


@pytest.mark.parametrize("reply", REPLIES, ids=lambda r: type(r).__name__)
def test_replies_round_trip(reply: object) -> None:
    line = encode_reply(reply)  # type: ignore[arg-type]
    assert line.endswith(b"\n") and b"\n" not in line[:-1]
    assert decode_reply(line[:-1]) == reply


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=512))
def test_arbitrary_bytes_only_ever_raise_protocol_errors(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_call(data)
    with contextlib.suppress(ProtocolError):
        decode_reply(data)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from([*body(), "host", "x"]), _json, max_size=12))
def test_arbitrary_objects_decode_or_are_refused_naming_a_field(data: dict[str, Any]) -> None:
    try:
        request = decode(data)
    except ProtocolError as exc:
        assert refusal_field(exc) in {*data, *body(), None}
        return
    assert request.op in ("evaluate", "cancel", "capabilities")
