"""Artifact collection through a real local session (`vibesys session serve --local` and
`vibesys-eval` as processes): a job that links its directory into itself still gets its
result within seconds, with the real files found; a sparse file over the operator's limit is
named in `artifact_problems`, never copied; the results copy shares the collected file."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.bridge.session_helpers import start_session
from vibesys.adapters.requests import recorded_limits
from vibesys.bridge.driving import ARTIFACT_LIMITS
from vibesys.journal_schema import open_journal
from vibesys.osutil.artifact_walk import Limits

pytestmark = pytest.mark.timeout(120)

#: the red team's job: a loop of directory links, results at two depths, a sparse 300 MB file,
#: and a file under the limit big enough that a second copy would show
JOB = (
    "ln -s . a; ln -s . b; mkdir -p deep/x; "
    "echo '{\"ok\": 1}' > result.json; echo '{\"n\": 2}' > deep/x/result.json; "
    "python3 -c \"open('big.bin', 'wb').truncate(300 << 20)\"; "
    "head -c 1048576 /dev/zero > model.bin; echo done"
)


def test_links_loops_and_an_oversized_artifact_still_give_the_result(tmp_path: Path) -> None:
    limit = 2 << 20
    session = start_session(tmp_path, "--local", extra=("--artifact-max", str(limit)))
    try:
        result_file = tmp_path / "r.json"
        started = time.monotonic()
        rc, out, err = session.evaluate(
            *("--artifact", "**/result.json", "--artifact", "*.bin"),
            *("--result", str(result_file), "--", "sh", "-c", JOB),
        )
        took = time.monotonic() - started
    finally:
        status, session_err = session.stop()
    assert rc == 0, err
    assert took < 30, f"the evaluation took {took:.1f} s"
    assert status == 0, session_err  # teardown settled: nothing UNRESOLVED
    result = json.loads(result_file.read_text())
    assert out == "done\n"
    assert result["status"] == "COMPLETED"
    found = {a["path"]: a for a in result["artifacts"]}
    assert sorted(found) == ["deep/x/result.json", "model.bin", "result.json"]
    (problem,) = result["artifact_problems"]
    assert (problem["path"], problem["state"]) == ("big.bin", "refused")
    assert f"over the limit of {limit} bytes per artifact" in problem["detail"]
    copy = Path(result["results_dir"]) / "artifacts"
    assert not (copy / "big.bin").exists()
    collected = Path(found["model.bin"]["local_path"])
    assert not (collected.parent / "big.bin").exists()  # refused unread, not copied
    # The results copy is the collected file under a second name: no second megabyte.
    assert os.stat(copy / "model.bin").st_ino == os.stat(collected).st_ino
    assert os.stat(collected).st_nlink >= 2
    assert (copy / "result.json").read_text() == '{"ok": 1}\n'
    # The limits are recorded with the request: a restarted session enforces the same.
    journal = open_journal(tmp_path / ".vibesys" / "journal.db", readonly=True)
    try:
        row = journal.bridge.recorded_evaluation_of(result["invocation_id"])
    finally:
        journal.close()
    assert row is not None
    assert recorded_limits(row.body[ARTIFACT_LIMITS]) == Limits(max_file_bytes=limit)
