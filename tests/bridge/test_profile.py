"""A profile short of Slurm: what the runner records for `--kind profile --profiler NAME` before
anything is submitted (the profiler and its capture paths with the request, the captures as the
invocation's artifacts, the command under the operator's profiler with its variables), and the
session's offer (the Slurm site's table; none elsewhere)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vibesys.adapters.candidate import RecordedCandidate, checked_manifest
from vibesys.bridge.admission import Evaluation
from vibesys.bridge.recorded import evaluation_of
from vibesys.bridge.runner import CAPTURES, EvaluationRunner
from vibesys.bridge.site import resolve_site
from vibesys.config.resources import PortableResources
from vibesys.engine.context import load_context
from vibesys.journal_schema import open_journal
from vibesys.states import JobState

SITE = """
[slurm]
name = "site-a"
remote_workspace_root = "{remote}"

[slurm.transport]
kind = "local"

[vibesys.agent_gpu]
partitions = ["main"]
max_gpus = 1
max_time_minutes = 60
default_time_minutes = 5

[vibesys.agent_gpu.profilers.py-spy]
command = ["py-spy", "record", "-o", "{{capture}}.json", "--"]
captures = ["{{capture}}.json"]
env = ["PYSPY_RATE=200"]
"""


def profile(workspace: Path, profiler: str = "py-spy") -> Evaluation:
    return Evaluation(
        request_id="r-1",
        run_id="campaign-1",
        workspace=str(workspace),
        kind="profile",
        argv=("python3", "busy.py"),
        timeout_requested=None,
        timeout_seconds=90,
        env={"PYSPY_RATE": "1"},
        artifacts=("out/*.txt",),
        profiler=profiler,
    )


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EvaluationRunner:
    (tmp_path / "ws").mkdir()
    config = tmp_path / "slurm.toml"
    config.write_text(SITE.format(remote=tmp_path / "remote"))
    site = resolve_site(
        run_id="campaign-1",
        workspace=str(tmp_path / "ws"),
        resources=PortableResources(),
        slurm_config=config,
    )
    made = EvaluationRunner(tmp_path / "journal.db", site, tmp_path / "results", {})
    # Recorded, never driven: nothing reaches the scheduler here.
    monkeypatch.setattr(made.driver, "drive", lambda handle: handle.done.set())
    return made


def test_a_profile_is_recorded_before_anything_is_submitted(
    runner: EvaluationRunner, tmp_path: Path
) -> None:
    handle, known = runner.start(profile(tmp_path / "ws"))
    assert not known
    journal = open_journal(tmp_path / "journal.db")
    try:
        row = journal.bridge.recorded_evaluation("campaign-1", "r-1")
        assert row is not None
        assert (row.kind, row.body["profiler"], row.body[CAPTURES]) == (
            "profile",
            "py-spy",
            ["vibesys-profile.json"],
        )
        inv = journal.invocations.get(handle.invocation_id)
        assert inv.state is JobState.PREPARED and inv.attempt == 0
        profiler = ["py-spy", "record", "-o", "vibesys-profile.json", "--"]
        assert inv.command == [*profiler, "python3", "busy.py"]
        # The operator's variables win over the agent's: the profiler needs them as configured.
        assert load_context(inv).env["PYSPY_RATE"] == "200"
        request = inv.recorded_request
        assert request["artifacts"] == ["out/*.txt", "vibesys-profile.json"]
        # A restarted session rebuilds the same evaluation from the row.
        assert evaluation_of(row, inv).profiler == "py-spy"
    finally:
        journal.close()


def test_a_file_of_a_captures_name_never_reaches_the_jobs_copy(
    runner: EvaluationRunner, tmp_path: Path
) -> None:
    """A stale or planted file of the capture's name would pose as the capture when the
    profiler writes none: the snapshot leaves the capture's names out, recorded with the
    candidate, so the stage (which reads the tree again under the recorded policy) does too,
    whenever the file appears."""
    workspace = tmp_path / "ws"
    (workspace / "busy.py").write_text("print(1)\n")
    (workspace / "sub").mkdir()
    (workspace / "sub" / "vibesys-profile.json").write_text("{}")  # not the capture's path
    (workspace / "vibesys-profile.json").write_text("{}")
    handle, _ = runner.start(profile(workspace))
    journal = open_journal(tmp_path / "journal.db")
    try:
        candidate = journal.invocations.get(handle.invocation_id).recorded_request["candidate"]
    finally:
        journal.close()
    assert candidate["exclude"] == ["/vibesys-profile.json"]
    recorded = RecordedCandidate(
        **{k: v if k != "exclude" else tuple(v) for k, v in candidate.items()}
    )
    staged = {entry.path for entry in checked_manifest(recorded).entries}
    assert staged == {"busy.py", "sub", "sub/vibesys-profile.json"}, staged
    (workspace / "vibesys-profile.json").unlink()  # the digest never counted it
    assert checked_manifest(recorded).digest == candidate["digest"]


def test_only_a_slurm_site_offers_its_profilers(runner: EvaluationRunner, tmp_path: Path) -> None:
    assert list(runner.site.profilers()) == ["py-spy"]
    local = resolve_site(
        run_id="campaign-1",
        workspace=str(tmp_path / "ws"),
        resources=PortableResources(),
        local=True,
    )
    assert dict(local.profilers()) == {}
