"""Candidate snapshots on the real cluster: the job runs the recorded code, a tampered snapshot
never runs its command, and the next attempt replaces it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers.slurm import cli, run_args, settled_sacct, show
from vibesys.adapters import candidate as candidate_module
from vibesys.adapters import staging as staging_module
from vibesys.adapters.slurm.request import RecordedCandidate, SbatchRequest
from vibesys.engine import DriveOptions, Engine, RetryPolicy, drive
from vibesys.journal_schema import open_journal
from vibesys.snapshot import build_manifest
from vibesys.states import FailureClass, Outcome

pytestmark = pytest.mark.slurm


def candidate(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.py").write_text('print("candidate v1")\n')
    (root / ".env").write_text("TOKEN=never-uploaded\n")
    return root


def test_job_runs_the_recorded_snapshot(tmp_path: Path, slurm_toml: Path) -> None:
    cand = candidate(tmp_path / "cand")
    digest = build_manifest(cand).digest
    args = run_args("sbatch", slurm_toml, "--candidate", str(cand), "--json")
    result = cli(*args, "sh", "-c", "python3 src/main.py; ls -a", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    inv = show(tmp_path, result.stdout.split('"id": "')[1].split('"')[0])
    assert inv["snapshot_digest"] == digest
    out = (Path(inv["invocation_dir"]) / "1" / "stdout").read_text()
    assert out.startswith("candidate v1\n")
    assert ".env" not in out.split()  # credentials never leave the host
    snapshots = list((tmp_path / "remote" / "snapshots").iterdir())
    assert [p.name for p in snapshots] == [digest]


def prepare_candidate_run(tmp_path: Path, slurm_toml: Path, cand: Path) -> tuple[Engine, Any]:
    """An sbatch invocation of `python3 src/main.py` in a snapshot of `cand`, PREPARED."""
    engine = Engine(open_journal(tmp_path / "j.db"), retry=RetryPolicy(2, 0.5))
    request = SbatchRequest(
        site_config=str(slurm_toml),
        time_minutes=5,
        partitions=("main",),
        candidate=RecordedCandidate(path=str(cand), digest=build_manifest(cand).digest),
    )
    inv = engine.prepare(adapter="sbatch", command=["python3", "src/main.py"], request=request)
    return engine, inv


def test_candidate_changed_after_prepare_is_refused(
    tmp_path: Path, slurm_toml: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cand = candidate(tmp_path / "cand")
    original = build_manifest

    def edit_then_build(root: Any, policy: Any = None) -> Any:
        (Path(root) / "src" / "main.py").write_text('print("edited after PREPARED")\n')
        return original(root, policy)

    engine, inv = prepare_candidate_run(tmp_path, slurm_toml, cand)
    journal = engine.journal
    # The sbatch adapter builds the candidate's manifest through `adapters/candidate.py`.
    monkeypatch.setattr(candidate_module, "build_manifest", edit_then_build)
    final = drive(engine, inv, DriveOptions())
    # Running other code than recorded is never done; a person must run it again.
    assert final.outcome is Outcome.MISCONFIGURED
    last = journal.invocations.history(inv.id)[-1].evidence
    assert "changed since it was recorded" in last["reason"] and "run again" in last["fix"]


def test_tampered_snapshot_never_runs_and_is_replaced(
    tmp_path: Path, slurm_toml: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cand = candidate(tmp_path / "cand")
    marker = tmp_path / "tampered-code-ran"
    real_stage = staging_module.stage
    calls: list[str] = []

    def stage_then_tamper(manifest: Any, root: Any, runner: Any, remote: Any, **kw: Any) -> Any:
        staged = real_stage(manifest, root, runner, remote, **kw)
        calls.append(str(staged.outcome))
        if len(calls) == 1:  # an intruder edits the shared snapshot before the job copies it
            (Path(str(staged.snapshot_dir)) / "src" / "main.py").write_text(
                f"open({str(marker)!r}, 'w').write('ran')\n"
            )
        return staged

    monkeypatch.setattr(staging_module, "stage", stage_then_tamper)
    engine, inv = prepare_candidate_run(tmp_path, slurm_toml, cand)
    journal = engine.journal
    final = drive(engine, inv, DriveOptions())
    assert final.outcome is Outcome.COMPLETED
    assert not marker.exists(), "the tampered code must never run"
    attempts = journal.invocations.attempts(inv.id)
    assert [a.failure_class for a in attempts] == [FailureClass.NODE_FAILED, FailureClass.COMPLETED]
    evidence = " ".join(str(h.evidence) for h in journal.invocations.history(inv.id))
    assert "setup failed" in evidence and "digest" in evidence
    assert calls == ["uploaded", "replaced"]
    assert (Path(final.invocation_dir) / "2" / "stdout").read_text() == "candidate v1\n"
    for attempt in attempts:
        assert len(settled_sacct(attempt.job_name)) == 1
