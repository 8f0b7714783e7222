"""The wire protocol without sockets: requests and replies round-trip, and every malformed,
unknown-version, oversized or badly typed line is refused with a message saying why."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vibesys.broker.protocol import (
    MAX_CALL_BYTES,
    PROTOCOL_VERSION,
    BrokerCall,
    LineDecoder,
    LineTooLong,
    ProtocolError,
    decode_call,
    encode_call,
    token_matches,
)
from vibesys.broker.replies import (
    Exit,
    Output,
    Refused,
    Waiting,
    decode_reply,
    encode_reply,
    waiting_line,
)

GOOD: dict[str, Any] = {
    "version": 1,
    "token": "s3cret",
    "cwd": "/work/ws",
    "argv": ["python3", "-c", "print(1)"],
    "gpus": 1,
    "time_minutes": 10,
    "env": {"FOO": "bar"},
}


def line(**changes: Any) -> bytes:
    body = {**GOOD, **changes}
    return json.dumps({k: v for k, v in body.items() if v is not _DROP}).encode()


_DROP = object()


def test_a_request_round_trips() -> None:
    request = decode_call(line())
    assert request == BrokerCall(
        "s3cret", "/work/ws", ("python3", "-c", "print(1)"), 1, 10, {"FOO": "bar"}
    )
    assert decode_call(encode_call(request).rstrip(b"\n")) == request


def test_a_request_is_frozen_and_never_shows_its_token() -> None:
    request = decode_call(line())
    with pytest.raises(AttributeError):
        request.gpus = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        request.env["FOO"] = "changed"  # type: ignore[index]
    assert "s3cret" not in repr(request)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"not json", "malformed message: not JSON"),
        (b"\xff\xfe", "malformed message: not UTF-8"),
        (b"[1, 2]", "malformed message: not a JSON object"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (line(version=2), "unsupported protocol version 2 (this broker speaks 1)"),
        (line(version=0), "unsupported protocol version 0"),
        (line(version="1"), "'version' must be an integer"),
        (line(version=_DROP), "'version' must be an integer"),
        (line(extra=1), "unknown field 'extra'"),
        (line(s3cret=1), "unknown field (a field that is not a lowercase name)"),
        (line(env={"s3cret x": "1"}), "env: name #1 is not a variable name"),
        (line(token=_DROP), "missing field 'token'"),
        (line(token=""), "'token' must be a non-empty string"),
        (line(cwd="relative/dir"), "'cwd' must be an absolute path"),
        (line(cwd="/a\u0000b"), "'cwd' must be an absolute path"),
        (line(argv=[]), "'argv' must be a non-empty list of strings"),
        (line(argv="ls -l"), "'argv' must be a non-empty list of strings"),
        (line(argv=["ls", 3]), "'argv' must be a non-empty list of strings"),
        (line(argv=[""]), "the program may not be ''"),
        (line(argv=["a\u0000b"]), "may not contain NUL"),
        (line(gpus=-1), "'gpus' must be an integer from 0 to 1024"),
        (line(gpus=True), "'gpus' must be an integer from 0 to 1024"),
        (line(gpus=1.5), "'gpus' must be an integer from 0 to 1024"),
        (line(gpus=1025), "'gpus' must be an integer from 0 to 1024"),
        (line(gpus=2**63), "'gpus' must be an integer from 0 to 1024"),
        (line(gpus=7).replace(b": 7", b": " + b"7" * 5000), "an integer of more than 30 digits"),
        (line(gpus=float("nan")), "NaN is not JSON"),
        (line(time_minutes=0), "'time_minutes' must be null or an integer from 1 to 14400"),
        (line(time_minutes="5"), "'time_minutes' must be null or an integer from 1 to 14400"),
        (line(time_minutes=14401), "'time_minutes' must be null or an integer from 1 to 14400"),
        (line(timeout_seconds=0), "'timeout_seconds' must be null or an integer from 1 to"),
        (line(timeout_seconds=2.5), "'timeout_seconds' must be null or an integer from 1 to"),
        (line(timeout_seconds=True), "'timeout_seconds' must be null or an integer from 1 to"),
        (line(timeout_seconds=2**63), "'timeout_seconds' must be null or an integer from 1 to"),
        (line(env={"A\n": "1"}), "is not a variable name"),
        (line(env=["A=1"]), "'env' must be an object of strings"),
        (line(env={"A": "1", "A B": "1"}), "env: name #2 is not a variable name"),
        (line(env={"A": 1}), "env: A must be a string without NUL"),
        (line(env={"A": "x\u0000y"}), "env: A must be a string without NUL"),
    ],
)
def test_bad_requests_are_refused_with_the_reason(raw: bytes, message: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        decode_call(raw)
    assert message in str(caught.value)
    assert "s3cret" not in str(caught.value)


def test_null_time_means_the_default() -> None:
    assert decode_call(line(time_minutes=None)).time_minutes is None


def test_a_timeout_is_optional_and_round_trips() -> None:
    assert decode_call(line()).timeout_seconds is None  # an older client sends none
    request = decode_call(line(timeout_seconds=75))
    assert request.timeout_seconds == 75
    assert decode_call(encode_call(request).rstrip(b"\n")) == request
    assert b"timeout_seconds" not in encode_call(decode_call(line()))


def test_token_comparison() -> None:
    request = decode_call(line())
    assert token_matches(request, "s3cret")
    assert not token_matches(request, "s3cret2")
    assert not token_matches(request, "S3CRET")
    assert not token_matches(request, "")


def test_the_line_decoder_splits_at_newlines_across_feeds() -> None:
    decoder = LineDecoder(100)
    assert decoder.feed(b"ab") == []
    assert decoder.feed(b"c\nde\n\nf") == [b"abc", b"de", b""]
    assert decoder.pending() == b"f"


def test_an_oversized_line_is_refused_before_its_newline_arrives() -> None:
    decoder = LineDecoder(MAX_CALL_BYTES)
    decoder.feed(b"x" * MAX_CALL_BYTES)
    with pytest.raises(LineTooLong, match=f"line exceeds {MAX_CALL_BYTES} bytes"):
        decoder.feed(b"x")
    # Broken for good: nothing more is buffered or returned.
    with pytest.raises(LineTooLong):
        decoder.feed(b"\n")
    assert decoder.pending() == b""


def test_an_oversized_line_inside_one_feed_is_refused() -> None:
    with pytest.raises(LineTooLong):
        LineDecoder(10).feed(b"short\n" + b"y" * 11 + b"\n")


REPLIES = [
    Output("stdout", b"hello\n"),
    Output("stderr", bytes(range(256))),
    Waiting(active=2, cap=2, ahead=1),
    Exit(0),
    Exit(137),
    Refused("commands must run from inside the run's workspace"),
]


@pytest.mark.parametrize("reply", REPLIES, ids=lambda r: type(r).__name__)
def test_replies_round_trip_as_single_lines(reply: Output | Waiting | Exit | Refused) -> None:
    encoded = encode_reply(reply)
    assert encoded.endswith(b"\n") and encoded.count(b"\n") == 1
    assert json.loads(encoded)["version"] == PROTOCOL_VERSION
    assert decode_reply(encoded.rstrip(b"\n")) == reply


def test_the_waiting_line() -> None:
    assert waiting_line(Waiting(2, 2, 1)) == (
        "[vibesys-gpu] waiting: 2 of this run's GPU jobs are active (cap 2), 1 queued ahead"
    )
    assert json.loads(encode_reply(Waiting(1, 1, 0)))["message"] == (
        "[vibesys-gpu] waiting: 1 of this run's GPU job is active (cap 1), 0 queued ahead"
    )


@pytest.mark.parametrize(
    "raw",
    [
        b'{"version": 2, "type": "exit", "status": 0}',
        b'{"version": 1, "type": "exit", "status": "0"}',
        b'{"version": 1, "type": "output", "stream": "stdin", "data": ""}',
        b'{"version": 1, "type": "output", "stream": "stdout", "data": "***"}',
        b'{"version": 1, "type": "teleport"}',
    ],
)
def test_bad_replies_are_refused(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_reply(raw)


@given(
    argv=st.lists(st.text(st.characters(exclude_characters="\0"), min_size=1), min_size=1),
    env=st.dictionaries(
        st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,10}\Z"),
        st.text(st.characters(exclude_characters="\0")),
    ),
    gpus=st.integers(0, 64),
    minutes=st.one_of(st.none(), st.integers(1, 10_000)),
)
def test_any_valid_request_round_trips(
    argv: list[str], env: dict[str, str], gpus: int, minutes: int | None
) -> None:
    request = BrokerCall("t", "/w", tuple(argv), gpus, minutes, env)
    assert decode_call(encode_call(request).rstrip(b"\n")) == request


@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_crash_the_decoder(raw: bytes) -> None:
    try:
        assert isinstance(decode_call(raw), BrokerCall)
    except ProtocolError as exc:
        assert str(exc)


def test_the_client_sends_its_timeout_and_refuses_a_bad_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from vibesys.broker import client

    args = client.parse_args(["--timeout-seconds", "75", "--", "sleep", "120"])
    sent = decode_call(client.call_line(args, "tok", "/work/ws").rstrip(b"\n"))
    assert (sent.timeout_seconds, sent.time_minutes, sent.argv) == (75, None, ("sleep", "120"))
    plain = client.parse_args(["--", "true"])
    assert decode_call(client.call_line(plain, "tok", "/w").rstrip(b"\n")).timeout_seconds is None
    with pytest.raises(SystemExit) as caught:
        client.parse_args(["--timeout-seconds", "0", "--", "true"])
    assert caught.value.code == 2
    assert "--timeout-seconds 0: must be a positive integer" in capsys.readouterr().err
