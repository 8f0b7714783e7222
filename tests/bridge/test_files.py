"""A local evaluation's copy of the candidate: staged once per digest, probed and verified by
the stager's own code in the session's process; a staged snapshot changed since is replaced,
never copied."""

from __future__ import annotations

from pathlib import Path

from vibesys.bridge.files import stage_local_candidate


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
