"""A SkyPilot evaluation's candidate goes through the same snapshot policy and digest as the
Slurm adapters' (on the scripted fake `sky`, whose jobs really run): credentials, .env, keys,
VCS metadata, caches and large model weights never leave the host, the digest recorded at
PREPARED is verified where the job runs (a copy that does not verify there never runs:
tests/adapters/skypilot/test_task_wrapper.py), and an unchanged candidate sends nothing again."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.engine.skypilot.conftest import engine_on
from tests.helpers.skyfake import FakeSky, make_fake_sky
from vibesys.adapters.candidate import digest_candidate
from vibesys.adapters.skypilot.backend import SkyPilotBackend
from vibesys.adapters.skypilot.request import SkyPilotRequest
from vibesys.engine import DriveOptions, Engine, drive
from vibesys.engine.clusters import release_cluster
from vibesys.journal_schema import Invocation, LeaseState
from vibesys.snapshot import build_manifest
from vibesys.states import FailureClass, Outcome

SECRETS = (".env", "id_rsa", ".git", "__pycache__", "model.safetensors")


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeSky]:
    sky = make_fake_sky(tmp_path)
    yield sky
    sky.stop_jobs()


def make_candidate(root: Path) -> Path:
    candidate = root / "candidate"
    (candidate / "src").mkdir(parents=True)
    (candidate / "src" / "main.py").write_text("print('candidate')\n")
    (candidate / ".env").write_text("API_TOKEN=secret\n")
    (candidate / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (candidate / ".git").mkdir()
    (candidate / ".git" / "config").write_text("[remote]\n")
    (candidate / "src" / "__pycache__").mkdir()
    (candidate / "src" / "__pycache__" / "main.cpython-311.pyc").write_bytes(b"\0" * 16)
    with open(candidate / "model.safetensors", "wb") as weights:  # 200 MB, sparse
        weights.truncate(200 * 1024 * 1024)
    return candidate


def leaked(root: Path, candidate: Path) -> list[str]:
    """Everything under `root` outside the candidate itself that bears a secret's name."""
    return sorted(
        str(path)
        for path in root.rglob("*")
        if path.name in SECRETS and candidate not in path.parents
    )


def run(engine: Engine, request: SkyPilotRequest, tmp_path: Path) -> tuple[Invocation, str]:
    """One evaluation listing its work directory; the clusters.toml it was recorded from is
    gone before it is submitted (it runs with the recorded profile)."""
    command = ["sh", "-c", "find . -type f | sort; python3 src/main.py"]
    inv = engine.prepare(
        adapter="skypilot", command=command, request=request, run_root=tmp_path / "runs"
    )
    Path(request.clusters_config).unlink()
    inv = drive(engine, inv, DriveOptions())
    assert inv.outcome is Outcome.COMPLETED, engine.journal.invocations.history(inv.id)[-1]
    rows = [r for r in engine.journal.invocations.history(inv.id) if r.event == "Submitted"]
    return inv, str(rows[-1].evidence["observation"])


def test_only_the_snapshot_reaches_the_cluster_verified_and_sent_once(
    fake: FakeSky, tmp_path: Path
) -> None:
    candidate = make_candidate(tmp_path)
    digest = build_manifest(candidate).digest
    engine = engine_on(fake, tmp_path)
    recorded = digest_candidate(candidate, ())
    first, submitted = run(engine, fake.request(candidate=recorded), tmp_path)
    # The command ran in the verified copy: the snapshot's marker and the code, nothing else.
    assert engine.adapters.log_paths(first)[0].read_text().splitlines() == [
        "./.vibesys-snapshot", "./src/main.py", "candidate",
    ]  # fmt: skip
    assert first.snapshot_digest == digest and first.site_digest is not None
    assert f"snapshot {digest} uploaded" in submitted
    snapshot = fake.remote / "snapshots" / digest
    assert sorted(p.name for p in snapshot.rglob("*")) == [".vibesys-snapshot", "main.py", "src"]
    assert leaked(tmp_path, candidate) == []
    assert os.path.getsize(candidate / "model.safetensors") == 200 * 1024 * 1024  # untouched
    # SkyPilot was handed no workdir to sync.
    [task] = [json.loads(Path(c[-1]).read_text()) for c in fake.calls("exec")]
    assert "workdir" not in task

    # Unchanged: nothing is uploaded again (a request recorded with `workdir`, the old field,
    # is staged the same way).
    second, submitted = run(engine, fake.request(workdir=str(candidate)), tmp_path)
    assert (
        engine.adapters.log_paths(second)[0].read_text()
        == engine.adapters.log_paths(first)[0].read_text()
    )
    assert f"snapshot {digest} verified at {snapshot}: reused, nothing uploaded" in submitted
    assert leaked(tmp_path, candidate) == []

    # The campaign's cluster is released with the profile it was launched with: the file is
    # long gone.
    [lease] = engine.journal.clusters.cluster_leases()
    assert lease.site_digest == first.site_digest
    assert release_cluster(engine, lease.id, "campaign over").state is LeaseState.RELEASED


def test_a_snapshot_changed_on_the_cluster_after_staging_never_runs(
    fake: FakeSky, tmp_path: Path
) -> None:
    """Staging verifies the copy it installs; the job verifies it again where it runs. A copy
    changed in between (on the shared file system, before the job starts) fails the job's own
    check: the command never runs (setup_failed), the attempt is an infrastructure failure,
    and the retry stages a verified copy again (the bad one is quarantined) and runs."""
    candidate = make_candidate(tmp_path)
    digest = build_manifest(candidate).digest
    staged = fake.remote / "snapshots" / digest / "src" / "main.py"

    def backend(adapter: str, request: Any) -> SkyPilotBackend:
        built = fake.registry_backend(request)
        submit = built.ops.exec

        def tamper_then_exec(
            name: str, task_file: Path, passed: Mapping[str, str] | None = None
        ) -> tuple[int, str]:
            if not list(fake.remote.glob("*/1/claim")):  # the first attempt only
                staged.chmod(0o644)
                staged.write_text("print('not what was recorded')\n")
            return submit(name, task_file, passed)

        built.ops.exec = tamper_then_exec  # type: ignore[method-assign]
        return built

    engine = engine_on(fake, tmp_path)
    engine.adapters.backends = backend
    inv, _ = run(engine, fake.request(candidate=digest_candidate(candidate, ())), tmp_path)
    attempts = engine.journal.invocations.attempts(inv.id)
    assert [a.failure_class for a in attempts] == [FailureClass.NODE_FAILED, FailureClass.COMPLETED]
    first = fake.remote / inv.id / "1"
    assert (first / "setup_failed").exists() and not (first / "exit_code").exists()
    assert engine.adapters.log_paths(inv)[0].read_text().splitlines()[-1] == "candidate"
    assert list((fake.remote / "snapshots").glob(f".quarantine-{digest}-*"))
