"""Issue 34's finding against a real `session serve --local` and the real bwrap: an evaluation
reads its own copy of the candidate and nothing else of the host (not the session's token,
not an owner-only file elsewhere, not the workspace by its absolute path); only an operator's
`--unconfined` gives it the host's view, and `vibesys-eval capabilities` says which. The
confinement is recorded with the evaluation: a retry submitted by a restarted bridge is
confined as the first attempt was, whatever that bridge was started with."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.bridge.session_helpers import (
    BUDGET,
    HOST_VIEW,
    Session,
    result_line,
    serve_argv,
    start_session,
)

pytestmark = pytest.mark.timeout(120)


def prepare(root: Path) -> Path:
    """The candidate's workspace, and an owner-only file of the host's outside it."""
    workspace = root / "ws"
    workspace.mkdir(parents=True)
    (workspace / "candidate.txt").write_text("candidate\n")
    secret = root / "host" / "secret"
    secret.parent.mkdir()
    secret.write_text("host secret\n")
    secret.chmod(0o600)
    return workspace


def probe(session: Session) -> str:
    """One line per attempt: what the evaluation could do."""
    token = session.document["bridge"]["token_file"]
    secret = session.root / "host" / "secret"
    workspace = Path(session.document["workspace"])
    q = shlex.quote
    return (
        "cat candidate.txt; "
        f"cat {q(token)} >/dev/null 2>&1 && echo read-token || echo no-token; "
        f"cat {q(str(secret))} 2>/dev/null || echo no-secret; "
        f"(echo x > {q(str(workspace / 'planted'))}) 2>/dev/null && echo wrote-workspace "
        "|| echo no-workspace; "
        "echo y > made.txt && echo wrote-copy"
    )


def capabilities(session: Session) -> dict[str, object]:
    caps = session.helper("capabilities")
    printed, err = caps.communicate(timeout=BUDGET)
    assert caps.returncode == 0, err
    found: dict[str, object] = json.loads(printed)
    return found


def evaluate(session: Session) -> list[str]:
    rc, out, err = session.evaluate("--", "sh", "-c", probe(session))
    assert rc == 0, err
    assert result_line(out)["status"] == "COMPLETED"
    return out.splitlines()[:-1]


def test_a_local_evaluation_sees_its_copy_only_unless_the_operator_says_otherwise(
    tmp_path: Path,
) -> None:
    workspace = prepare(tmp_path / "confined")
    session = start_session(tmp_path / "confined")
    try:
        assert capabilities(session)["local_confined"] is True
        assert evaluate(session) == [
            "candidate",
            "no-token",
            "no-secret",
            "no-workspace",
            "wrote-copy",
        ]
    finally:
        status, err = session.stop()
    assert status == 0, err
    assert sorted(os.listdir(workspace)) == ["candidate.txt"], "the workspace is unchanged"

    workspace = prepare(tmp_path / "host")
    session = start_session(tmp_path / "host", extra=HOST_VIEW)
    try:
        assert capabilities(session)["local_confined"] is False
        assert evaluate(session) == [
            "candidate",
            "read-token",
            "host secret",
            "wrote-workspace",
            "wrote-copy",
        ]
    finally:
        status, err = session.stop()
    assert status == 0, err
    assert sorted(os.listdir(workspace)) == ["candidate.txt", "planted"]


def test_a_retry_is_confined_as_recorded_by_a_bridge_started_unconfined(tmp_path: Path) -> None:
    """The first bridge dies after dispatching the submission (nothing launched): the restarted
    one, though started with --unconfined, fences and submits attempt 2 from the record."""
    prepare(tmp_path)
    session = start_session(tmp_path, env={"VIBESYS_FAILPOINTS": "after_submit_dispatch"})
    helper = session.helper("--request-id", "eval-1", "--", "sh", "-c", probe(session))
    assert session.reap()[0] == 137  # stopped dead at the failpoint
    again = start_session(tmp_path, extra=HOST_VIEW)
    try:
        out, err = helper.communicate(timeout=BUDGET)
        assert helper.returncode == 0, err
        result = result_line(out)
        assert (result["status"], result["attempt"]) == ("COMPLETED", 2)
        assert out.splitlines()[:-1] == [
            "candidate",
            "no-token",
            "no-secret",
            "no-workspace",
            "wrote-copy",
        ]
    finally:
        status, err = again.stop()
    assert status == 0, err
    assert sorted(os.listdir(tmp_path / "ws")) == ["candidate.txt"]


def test_without_bwrap_a_confined_session_refuses_to_start_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    bare = {**os.environ, "PATH": str(tmp_path / "empty")}  # no bwrap on it
    done = subprocess.run(
        serve_argv(tmp_path, "--local"),
        capture_output=True,
        text=True,
        timeout=BUDGET,
        check=False,
        env=bare,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "bwrap is not on PATH: install bubblewrap, or serve with --unconfined" in lines[0]
    assert not (tmp_path / "state").exists(), "nothing was started"
    # The operator who said --unconfined needs no bwrap.
    session = start_session(tmp_path, extra=HOST_VIEW, env={"PATH": bare["PATH"]})
    status, err = session.stop()
    assert status == 0, err
