"""The log spool and artifact collection, against the FakeBackend's remote files."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.helpers.faults import Crash, crash_at, recover
from vibesys.adapters.base import ArtifactInfo, JobRef, RemoteState
from vibesys.adapters.fake import FakeAttempt, FakeBackend, FakeRequest
from vibesys.adapters.requests import ArtifactLimits
from vibesys.engine import DriveOptions, Engine, RetryPolicy, drive, reconcile
from vibesys.job_result import job_result
from vibesys.journal_schema import ArtifactState, Journal, open_journal
from vibesys.osutil.artifact_walk import Limits
from vibesys.states import JobState, Outcome

S = RemoteState


def engine_for(journal: Journal, fake: FakeBackend) -> Engine:
    policy = RetryPolicy(max_retries=2, initial_delay_seconds=0.0)
    return Engine(journal, lambda name, options: fake, retry=policy, owner="host:1:1")  # type: ignore[arg-type,return-value]


def running(engine: Engine, tmp_path: Path, artifacts: tuple[str, ...] = ()) -> str:
    request = FakeRequest(artifacts=artifacts)
    inv = engine.prepare(adapter="fake", command=["x"], request=request, run_root=tmp_path)
    return drive(engine, inv, DriveOptions(detach=True)).id


def test_spool_appends_by_offset_and_ends_identical(journal: Journal, tmp_path: Path) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING,))])
    engine = engine_for(journal, fake)
    inv_id = running(engine, tmp_path)
    name = f"vibesys-{inv_id}-1"
    remote = bytearray()
    fake.logs[(name, "stdout")] = remote
    chunks = [os.urandom(1000), b"\xff\xfe not utf-8 \xc3", b"", os.urandom(70_000)]
    for chunk in chunks:
        remote += chunk
        engine.spool(journal.invocations.get(inv_id))
        assert journal.progress.spool_offset(inv_id, 1, "stdout") == len(remote)
    local = Path(journal.invocations.get(inv_id).invocation_dir) / "1" / "stdout"
    assert local.read_bytes() == bytes(remote)
    reads = [c for c in fake.calls if c[0] == "read_log" and ":stdout@" in c[1]]
    offsets = [sum(len(c) for c in chunks[:i]) for i in range(len(chunks))]
    assert [int(c[1].rsplit("@", 1)[1]) for c in reads] == offsets


def test_crash_between_append_and_commit_duplicates_nothing(
    journal: Journal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING,))])
    engine = engine_for(journal, fake)
    inv_id = running(engine, tmp_path)
    remote = bytearray(b"first part\n")
    fake.logs[(f"vibesys-{inv_id}-1", "stdout")] = remote
    engine.spool(journal.invocations.get(inv_id))
    remote += b"second part\n"
    crash_at(monkeypatch, "after_spool_append")
    with pytest.raises(Crash):
        engine.spool(journal.invocations.get(inv_id))
    recover(monkeypatch)
    local = Path(journal.invocations.get(inv_id).invocation_dir) / "1" / "stdout"
    assert local.read_bytes() == bytes(remote)  # appended ...
    assert journal.progress.spool_offset(inv_id, 1, "stdout") == len(
        b"first part\n"
    )  # ... not committed
    remote += b"third\n"
    engine.spool(journal.invocations.get(inv_id))
    assert local.read_bytes() == bytes(remote)


def test_artifacts_verified_missing_and_mismatched(journal: Journal, tmp_path: Path) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.COMPLETED))])
    engine = engine_for(journal, fake)
    patterns = ["results/*.json", "model.bin", "nothing-*.txt"]
    inv = engine.prepare(
        adapter="fake",
        command=["x"],
        request=FakeRequest(artifacts=tuple(patterns)),
        run_root=tmp_path,
    )
    name = f"vibesys-{inv.id}-1"
    good = b'{"accuracy": 0.93}'
    fake.files[name] = {"results/a.json": good, "results/b.json": b"{}", "model.bin": b"w" * 10}
    fake.tampered["model.bin"] = b"x" * 10
    inv = drive(engine, inv, DriveOptions())
    assert inv.outcome is Outcome.COMPLETED
    rows = {row.path: row for row in journal.progress.artifacts(inv.id)}
    assert rows["results/a.json"].state is ArtifactState.ACKNOWLEDGED
    assert rows["results/a.json"].sha256 == hashlib.sha256(good).hexdigest()
    assert Path(str(rows["results/a.json"].local_path)).read_bytes() == good
    assert rows["model.bin"].state is ArtifactState.MISMATCH
    assert "sha256" in str(rows["model.bin"].detail)
    assert not (Path(inv.invocation_dir) / "1" / "artifacts" / "model.bin").exists()
    assert rows["nothing-*.txt"].state is ArtifactState.MISSING
    assert "artifacts: 2 acknowledged, 1 missing, 1 mismatch" in str(
        journal.invocations.history(inv.id)[-1].evidence["observation"]
    )


@pytest.mark.parametrize("point", ["after_artifact_download", "after_collect_effect"])
def test_collection_resumes_without_downloading_verified_files_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    path = tmp_path / "j.db"
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.COMPLETED))])
    engine = engine_for(open_journal(path), fake)
    inv = engine.prepare(
        adapter="fake", command=["x"], request=FakeRequest(artifacts=("*.txt",)), run_root=tmp_path
    )
    fake.files[f"vibesys-{inv.id}-1"] = {"a.txt": b"a", "b.txt": b"b", "c.txt": b"c"}
    crash_at(monkeypatch, point)
    with pytest.raises(Crash):
        drive(engine, inv, DriveOptions())
    recover(monkeypatch)
    before = [p for kind, p in fake.calls if kind == "fetch"]
    survivor = engine_for(open_journal(path), fake)
    assert survivor.journal.invocations.get(inv.id).state is JobState.COLLECTING
    reconcile(survivor)
    final = survivor.journal.invocations.get(inv.id)
    assert final.state is JobState.DONE and final.outcome is Outcome.COMPLETED
    again = [p for kind, p in fake.calls if kind == "fetch"][len(before) :]
    if point == "after_collect_effect":
        assert again == []  # everything was verified and recorded before the crash
    else:
        assert again == ["a.txt", "b.txt", "c.txt"][len(before) - 1 :]
    states = {r.path: r.state for r in survivor.journal.progress.artifacts(inv.id)}
    assert states == dict.fromkeys(("a.txt", "b.txt", "c.txt"), ArtifactState.ACKNOWLEDGED)


def test_a_refused_artifact_is_recorded_with_its_reason_and_never_downloaded(
    journal: Journal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.COMPLETED))])
    engine = engine_for(journal, fake)
    inv = engine.prepare(
        adapter="fake", command=["x"], request=FakeRequest(artifacts=("*",)), run_root=tmp_path
    )
    fake.files[f"vibesys-{inv.id}-1"] = {"a.txt": b"a", "huge.bin": b"h"}
    listed = fake.list_artifacts

    def listing(job: JobRef, patterns: Sequence[str]) -> tuple[list[ArtifactInfo], list[str]]:
        found, missing = listed(job, patterns)
        why = "3221225472 bytes, over the limit of 1073741824 bytes per artifact"
        big = ArtifactInfo("huge.bin", 3 << 30, "", refused=why)
        return [f for f in found if f.path != "huge.bin"] + [big], missing

    monkeypatch.setattr(fake, "list_artifacts", listing)
    inv = drive(engine, inv, DriveOptions())
    assert inv.outcome is Outcome.COMPLETED
    assert [p for kind, p in fake.calls if kind == "fetch"] == ["a.txt"]
    rows = {row.path: row for row in journal.progress.artifacts(inv.id)}
    assert (rows["huge.bin"].state, rows["huge.bin"].size) == (ArtifactState.REFUSED, 3 << 30)
    assert "over the limit" in str(rows["huge.bin"].detail)
    result = job_result(
        inv,
        journal.invocations.attempts(inv.id),
        journal.invocations.history(inv.id),
        list(rows.values()),
    )
    assert [(p.path, p.state) for p in result.artifact_problems] == [("huge.bin", "refused")]
    assert "artifacts: 1 acknowledged, 1 refused" in str(
        journal.invocations.history(inv.id)[-1].evidence["observation"]
    )


def test_the_limits_a_request_recorded_reach_every_collection(
    journal: Journal, tmp_path: Path
) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING,))])
    engine = engine_for(journal, fake)
    limits = Limits(max_file_bytes=10, max_total_bytes=20, max_entries=30, max_seconds=4.0)
    recorded = FakeRequest(artifacts=("*",), artifact_limits=ArtifactLimits.of(limits))
    inv = engine.prepare(adapter="fake", command=["x"], request=recorded, run_root=tmp_path)
    assert engine.adapters.job_ref(journal.invocations.get(inv.id)).artifact_limits == limits
    plain = engine.prepare(
        adapter="fake", command=["x"], request=FakeRequest(artifacts=("*",)), run_root=tmp_path
    )
    assert (
        engine.adapters.job_ref(journal.invocations.get(plain.id)).artifact_limits is None
    )  # the defaults


def test_a_download_longer_than_its_listing_is_stopped_at_the_listed_size(
    journal: Journal, tmp_path: Path
) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.COMPLETED))])
    engine = engine_for(journal, fake)
    inv = engine.prepare(
        adapter="fake", command=["x"], request=FakeRequest(artifacts=("*",)), run_root=tmp_path
    )
    fake.files[f"vibesys-{inv.id}-1"] = {"m.bin": b"m" * 10}
    fake.tampered["m.bin"] = b"m" * 10 + b"\0" * (1 << 20)  # swapped for something endless
    inv = drive(engine, inv, DriveOptions())
    (row,) = journal.progress.artifacts(inv.id)
    assert row.state is ArtifactState.MISMATCH and "downloaded more than 10 bytes" in str(
        row.detail
    )
    partial = Path(inv.invocation_dir) / "1" / "artifacts" / "m.bin.part"
    assert partial.stat().st_size <= 10
