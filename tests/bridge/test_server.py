"""The bridge over a real Unix socket, on the local site: hostile requests are refused with the
reason and write nothing; an evaluation streams and ends with its JobResult; the same request
id reattaches (never a second invocation), from the offsets the helper has; another body or
another uid with the same id is refused; cancel and timeout settle it."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests.bridge.helpers import Bridge, as_other, final, make_bridge, output, talk, throwaway_uid
from vibesys.bridge.protocol import MAX_CALL_BYTES
from vibesys.service.tokens import BROKER_PREFIX, new_token


def refused(replies: list[dict[str, Any]]) -> tuple[str | None, str]:
    assert len(replies) == 1, replies
    assert replies[0]["type"] == "refused", replies
    return replies[0]["field"], replies[0]["message"]


def test_an_evaluation_streams_and_ends_with_its_result(bridge: Bridge) -> None:
    replies = bridge.talk(bridge.body(argv=["sh", "-c", "python3 eval.py; echo warn >&2; exit 3"]))
    kinds = [r["type"] for r in replies]
    assert kinds[:3] == ["accepted", "queued", "started"] and kinds[-1] == "result"
    assert replies[1]["position"] == 0
    assert replies[0]["reattached"] is False
    assert output(replies) == b"accuracy 0.93\n" and output(replies, "stderr") == b"warn\n"
    result = final(replies)
    assert result["exit_status"] == 3
    found = result["result"]
    assert (found["status"], found["exit_code"], found["attempt"]) == ("APPLICATION_FAILED", 3, 1)
    assert found["invocation_id"] == replies[0]["invocation"]
    copy = Path(found["results_dir"])
    assert copy == bridge.results / found["invocation_id"]
    assert (copy / "stdout").read_bytes() == b"accuracy 0.93\n"
    assert json.loads((copy / "result.json").read_text())["status"] == "APPLICATION_FAILED"
    assert Path(found["stdout_path"]).read_bytes() == b"accuracy 0.93\n"
    assert bridge.counts() == (1, 1)


def test_the_candidate_runs_in_a_copy_and_artifacts_come_home(bridge: Bridge) -> None:
    (bridge.workspace / "secret.txt").write_text("outside\n")
    (bridge.workspace / "out").mkdir()
    os.symlink(bridge.workspace / "secret.txt", bridge.workspace / "out" / "link.json")
    script = "mkdir -p out; echo '{\"a\": 1}' > out/m.json; echo changed > eval.py; pwd"
    replies = bridge.talk(
        bridge.body(argv=["sh", "-c", script], artifacts=["out/*.json", "none/*"])
    )
    found = final(replies)["result"]
    assert found["status"] == "COMPLETED"
    ran_in = output(replies).decode().strip()
    assert ran_in != str(bridge.workspace) and ran_in.endswith("/work")
    # Nothing comes back into the workspace.
    assert (bridge.workspace / "eval.py").read_text() == "print('accuracy 0.93')\n"
    assert not (bridge.workspace / "out" / "m.json").exists()
    (artifact,) = found["artifacts"]
    assert (artifact["path"], artifact["size"]) == ("out/m.json", 9)
    assert (Path(found["results_dir"]) / "artifacts" / "out" / "m.json").read_text() == '{"a": 1}\n'
    assert [(p["path"], p["state"]) for p in found["artifact_problems"]] == [("none/*", "missing")]


@pytest.mark.parametrize(
    "name", ["host", "account", "partition", "profile", "adapter", "mount_path", "journal"]
)
def test_each_forbidden_field_is_refused_with_the_reason(bridge: Bridge, name: str) -> None:
    field, message = refused(bridge.talk(bridge.body(**{name: "x"})))
    assert field == name and "is not the sandbox's to choose" in message
    assert bridge.counts() == (0, 0)


@pytest.mark.parametrize(
    ("changes", "field", "needle"),
    [
        ({"workspace": "/tmp/another-candidate"}, "workspace", "is not this session's workspace"),
        ({"artifacts": ["../x/*"]}, "artifacts", "relative glob inside the workspace"),
        ({"artifacts": ["/etc/*"]}, "artifacts", "relative glob inside the workspace"),
        ({"env": {"HOME": "/x"}}, "env", "variable HOME is not one the operator lets"),
        ({"token": "vbeval1.wrong"}, "token", "this bridge serves another session"),
        ({"token": new_token(BROKER_PREFIX)}, "token", "that is the GPU broker's token"),
        ({"run": "campaign-2"}, "run", "is not this session's campaign"),
        ({"surprise": True}, "surprise", "unknown field 'surprise'"),
    ],
)
def test_hostile_requests_are_refused_and_write_nothing(
    bridge: Bridge, changes: dict[str, Any], field: str, needle: str
) -> None:
    named, message = refused(bridge.talk(bridge.body(**changes)))
    assert named == field and needle in message, message
    assert bridge.token not in message
    assert bridge.counts() == (0, 0)


def test_an_oversized_line_is_refused(bridge: Bridge) -> None:
    line = json.dumps(bridge.body(argv=["x" * (MAX_CALL_BYTES + 10)])).encode() + b"\n"
    field, message = refused(bridge.talk(line))
    assert field is None and f"line exceeds {MAX_CALL_BYTES} bytes" in message
    assert bridge.counts() == (0, 0)


def test_a_truncated_line_is_refused(bridge: Bridge) -> None:
    line = json.dumps(bridge.body()).encode()[:-5]
    _, message = refused(bridge.talk(line, half_close=True))
    assert message == "request: truncated (the connection ended before its newline)"
    assert bridge.counts() == (0, 0)


def test_the_same_request_id_reattaches_to_the_same_invocation(bridge: Bridge) -> None:
    body = bridge.body(argv=["sh", "-c", "printf 'one\\ntwo\\nthree\\n'"])
    first = bridge.talk(body)
    again = bridge.talk({**body, "resume": {"attempt": 1, "stdout": 4, "stderr": 0}})
    assert again[0]["type"] == "accepted" and again[0]["reattached"] is True
    assert again[0]["invocation"] == first[0]["invocation"]
    assert output(first) == b"one\ntwo\nthree\n"
    assert output(again) == b"two\nthree\n"  # from the offset the helper had
    done = bridge.talk({**body, "resume": {"attempt": 1, "stdout": 14, "stderr": 0}})
    assert output(done) == b"" and final(done)["result"] == final(first)["result"]
    assert bridge.counts() == (1, 1)


def test_the_same_request_id_with_another_body_is_refused(bridge: Bridge) -> None:
    bridge.talk(bridge.body(argv=["true"]))
    field, message = refused(bridge.talk(bridge.body(argv=["false"])))
    assert field == "argv"
    assert message == (
        "request id r-1 was sent before with another argv; use a new request id for another request"
    )
    field, message = refused(bridge.talk(bridge.body(argv=["true"], env={"SEED": "2"})))
    assert field == "env"
    assert bridge.counts() == (1, 1)


def test_the_same_request_id_with_other_values_is_refused(bridge: Bridge) -> None:
    body = bridge.body(argv=["sh", "-c", "echo $SEED"], env={"SEED": "1"})
    assert output(bridge.talk(body)) == b"1\n"
    field, message = refused(bridge.talk({**body, "env": {"SEED": "2"}}))
    assert (
        field == "env"
        and "another value of SEED" in message
        and "2" not in message.replace("r-1", "")
    )


def test_capabilities_and_a_cancel(bridge: Bridge) -> None:
    caps = bridge.talk({"version": 1, "op": "capabilities", "token": bridge.token})
    assert caps == [{"version": 1, "type": "capabilities", "capabilities": {"backend": "local"}}]
    bad = bridge.talk({"version": 1, "op": "capabilities", "token": "vbeval1.no"})
    assert refused(bad)[0] == "token"
    marker = bridge.workspace.parent / "started"
    body = bridge.body(request_id="r-long", argv=["sh", "-c", f"touch {marker}; sleep 60"])
    import threading

    replies: list[dict[str, Any]] = []
    following = threading.Thread(target=lambda: replies.extend(bridge.talk(body)))
    following.start()
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    cancel = {k: body[k] for k in ("version", "token", "request_id", "run", "workspace")}
    answer = bridge.talk({**cancel, "op": "cancel"})
    assert answer[0]["type"] == "cancelling", answer
    following.join(30)
    result = final(replies)
    assert (result["result"]["status"], result["exit_status"]) == ("CANCELLED", 130)
    unknown = bridge.talk({**cancel, "op": "cancel", "request_id": "r-none"})
    assert refused(unknown) == ("request_id", "no evaluation has request id r-none")


def test_a_timeout_ends_the_evaluation_as_timeout(bridge: Bridge) -> None:
    started = time.monotonic()
    replies = bridge.talk(bridge.body(argv=["sleep", "60"], timeout_seconds=1))
    result = final(replies)
    assert (result["result"]["status"], result["exit_status"]) == ("TIMEOUT", 124)
    assert time.monotonic() - started < 20
    assert "timeout: 1 s" in (result["result"]["reason"] or "")


def test_a_helper_that_leaves_does_not_stop_the_evaluation(bridge: Bridge) -> None:
    import socket

    marker = bridge.workspace.parent / "finished"
    body = bridge.body(request_id="r-left", argv=["sh", "-c", f"sleep 1; touch {marker}"])
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(bridge.socket_path))
    conn.sendall(json.dumps(body).encode() + b"\n")
    assert b"accepted" in conn.recv(4096)
    conn.close()  # gone, as a lost connection would be
    again = bridge.talk(body)
    assert final(again)["result"]["status"] == "COMPLETED" and marker.exists()
    assert again[0]["reattached"] is True and bridge.counts() == (1, 1)


@pytest.mark.skipif(os.geteuid() != 0, reason="a throwaway uid needs root (CI runs as root)")
def test_another_uid_reusing_a_request_id_is_refused(workspace: Path) -> None:
    other = throwaway_uid()
    # pytest's tmp_path lies under a 0700 directory of root's that another user cannot enter.
    root = Path(tempfile.mkdtemp(prefix="vibesys-bridge-uid-"))
    root.chmod(0o755)
    served, stop = make_bridge(root, workspace)
    try:
        served.server.socket.allowed_uids = frozenset({os.getuid(), other})
        served.socket_path.parent.chmod(0o755)
        served.socket_path.chmod(0o666)
        body = served.body(argv=["true"])
        assert final(served.talk(body))["result"]["status"] == "COMPLETED"
        body_line = json.dumps(body).encode() + b"\n"
        (reply,) = as_other(other, served.socket_path, body_line)
        assert reply["type"] == "refused" and reply["field"] == "request_id"
        assert reply["message"] == "request id r-1 belongs to another user; use a new request id"
        served.server.socket.allowed_uids = frozenset({os.getuid()})
        (reply,) = as_other(other, served.socket_path, body_line)
        assert reply["message"] == f"uid {other} may not use this bridge"
        assert served.counts() == (1, 1)
    finally:
        stop.set()
        served.runner.close("the test is over", 30)
        served.server.close()
        shutil.rmtree(root)


def test_a_closing_runner_refuses_new_requests(tmp_path: Path, workspace: Path) -> None:
    served, stop = make_bridge(tmp_path, workspace)
    try:
        served.runner.close("SIGTERM received", 5)
        _, message = refused(talk(served.socket_path, served.body()))
        assert message == "the session is shutting down (SIGTERM received)"
        assert served.counts() == (0, 0)
    finally:
        stop.set()
        served.server.close()
