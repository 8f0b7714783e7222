"""A local evaluation's copy of the candidate: staged once per digest, probed and verified by
the stager's own code in the session's process; a staged snapshot changed since is replaced,
never copied."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from vibesys.bridge.files import collect_local_artifacts, copy_result, stage_local_candidate
from vibesys.job_result import JobResult


def test_the_copy_is_the_snapshot_and_a_changed_stage_is_replaced(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "main.py").write_text("print('recorded')\n")
    (workspace / ".env").write_text("SECRET=1\n")  # left out by the snapshot policy
    stage_root = tmp_path / "stage"
    first = stage_local_candidate(str(workspace), stage_root, tmp_path / "run-1")
    assert (first / "src" / "main.py").read_text() == "print('recorded')\n"
    assert not (first / ".env").exists()
    (staged,) = (stage_root / "snapshots").iterdir()
    target = staged / "src" / "main.py"
    target.chmod(0o644)
    target.write_text("print('changed on the stage')\n")
    second = stage_local_candidate(str(workspace), stage_root, tmp_path / "run-2")
    assert (second / "src" / "main.py").read_text() == "print('recorded')\n"
    # The changed copy was moved aside and a verified one installed in its place.
    assert (stage_root / "snapshots" / staged.name / "src" / "main.py").read_text() == (
        "print('recorded')\n"
    )


def test_collected_artifacts_are_our_own_copies_and_the_results_copy_shares_them(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    (work / "out").mkdir(parents=True)
    (work / "out" / "m.json").write_bytes(b"x" * 70_000)
    os.symlink(".", work / "loop")
    target = tmp_path / "attempt" / "artifacts"
    found, missing, refused = collect_local_artifacts(work, ["**/*.json", "none/*"], target)
    ((path, size, digest, copy),) = found
    assert (path, size, missing, refused) == ("out/m.json", 70_000, ["none/*"], [])
    assert digest == hashlib.sha256(b"x" * 70_000).hexdigest()
    # A clone or a copy, never a link to the evaluation's file: it cannot change it any more.
    assert os.stat(copy).st_ino != os.stat(work / "out" / "m.json").st_ino
    (work / "out" / "m.json").write_bytes(b"changed")
    assert Path(copy).read_bytes() == b"x" * 70_000
    stdout = tmp_path / "attempt" / "stdout"
    stdout.write_bytes(b"log\n")
    result = JobResult.model_validate(
        {
            "invocation_id": "inv-1",
            "status": "COMPLETED",
            "exit_code": 0,
            "reason": None,
            "attempt": 1,
            "remote_job_id": None,
            "cluster_name": None,
            "stdout_path": str(stdout),
            "stderr_path": None,
            "artifacts": [{"path": path, "size": size, "sha256": digest, "local_path": copy}],
            "times": {
                "accepted_at": "2026-01-01T00:00:00Z",
                "queued_at": None,
                "started_at": None,
                "ended_at": None,
            },
            "state": "DONE",
            "outcome": "COMPLETED",
            "failure_class": None,
        },
        strict=False,
    )
    final = copy_result(result, tmp_path / "results")
    shared = final / "artifacts" / "out" / "m.json"
    assert os.stat(shared).st_ino == os.stat(copy).st_ino and os.stat(copy).st_nlink == 2
    assert (final / "stdout").read_bytes() == b"log\n"
    assert os.stat(final / "stdout").st_ino != os.stat(stdout).st_ino  # a spool: copied
    copy_result(result, tmp_path / "results")  # done again: the last copy replaced whole
    assert os.stat(copy).st_nlink == 2
