"""A SkyPilot job through the engine, on the campaign's cluster: its logs and artifacts come
home, a cancel stops it and keeps the cluster, and neither a crash after the exec nor an
unreachable API server mid-job executes it a second time."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from tests.engine.skypilot.conftest import engine_on, run
from tests.helpers.skyfake import FakeSky
from vibesys.engine import DriveOptions, drive, reconcile
from vibesys.engine.seen import Sight
from vibesys.journal_schema import LeaseState
from vibesys.states import JobState, Outcome


def test_logs_and_artifacts_come_home(fake: FakeSky, tmp_path: Path) -> None:
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    (candidate / "bench.sh").write_text("echo result line\nmkdir out\necho 42 > out/score\n")
    engine = engine_on(fake, tmp_path)
    request = fake.request(workdir=str(candidate), artifacts=["out/*"])
    inv = run(engine, request, ["sh", "bench.sh"], tmp_path)
    assert inv.outcome is Outcome.COMPLETED
    stdout, _ = engine.adapters.log_paths(inv)
    assert stdout.read_bytes() == b"result line\n"
    [artifact] = engine.journal.progress.artifacts(inv.id)
    assert (artifact.path, artifact.state) == ("out/score", "acknowledged")
    assert Path(str(artifact.local_path)).read_bytes() == b"42\n"
    assert "vibesys: exit_code=0" in (stdout.parent / "sky.log").read_text()


def test_cancel_stops_the_job_and_keeps_the_cluster(fake: FakeSky, tmp_path: Path) -> None:
    engine = engine_on(fake, tmp_path)
    inv = engine.prepare(
        adapter="skypilot", command=["sleep", "60"], request=fake.request(), run_root=tmp_path
    )
    inv = drive(engine, inv, DriveOptions(detach=True))
    engine.request_cancel(inv, "test")
    inv = drive(engine, engine.journal.invocations.get(inv.id), DriveOptions())
    assert (inv.state, inv.outcome) == (JobState.DONE, Outcome.CANCELLED)
    assert len(fake.calls("cancel")) >= 1 and fake.calls("down") == []
    [lease] = engine.journal.clusters.cluster_leases()
    assert lease.state is LeaseState.UP
    assert fake.cluster_state(lease.name) is not None


def test_a_crash_after_the_exec_is_reattached_without_a_second_exec(
    fake: FakeSky, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.helpers.faults import Crash, crash_at, recover

    engine = engine_on(fake, tmp_path)
    crash_at(monkeypatch, "after_submit_effect")
    # The job runs until the test opens the gate: reconcile must see it running, however slow
    # the machine is.
    gate = tmp_path / "gate"
    wait_then_fail = f"while [ ! -e {gate} ]; do sleep 0.1; done; exit 4"
    with pytest.raises(Crash):
        run(engine, fake.request(), ["sh", "-c", wait_then_fail], tmp_path)
    recover(monkeypatch)
    survivor = engine_on(fake, tmp_path)
    [inv] = survivor.journal.invocations.list_invocations()
    assert inv.state is JobState.SUBMITTING and inv.job_id is None
    reconcile(survivor)
    inv = survivor.journal.invocations.get(inv.id)
    assert inv.state is JobState.RUNNING and inv.job_id == "1@200"  # found by its name
    gate.touch()
    inv = drive(survivor, inv, DriveOptions())
    assert (inv.outcome, inv.exit_code) == (Outcome.APPLICATION_FAILED, 4)
    assert len(fake.calls("exec")) == 1


@pytest.mark.parametrize(
    ("unreachable_timeout", "meanwhile"),
    [(timedelta(minutes=10), JobState.RUNNING), (timedelta(0), JobState.UNRESOLVED)],
)
def test_an_unreachable_api_server_mid_job_is_waited_out_without_a_second_exec(
    fake: FakeSky, tmp_path: Path, unreachable_timeout: timedelta, meanwhile: JobState
) -> None:
    """TRANSPORT_LOST mid-job: within the unreachable timeout the job is still running; past it, its
    fate is unknown until the control plane answers again and the job is found by name.
    Either way it is never executed again."""
    engine = engine_on(fake, tmp_path)
    engine.unreachable_timeout = unreachable_timeout
    gate = tmp_path / "gate"
    inv = engine.prepare(
        adapter="skypilot",
        command=["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.1; done; echo through"],
        request=fake.request(),
        run_root=tmp_path / "runs",
    )
    inv = drive(engine, inv, DriveOptions(detach=True))
    assert inv.state is JobState.RUNNING
    fake.control("fake-api-down", "2")
    seen = engine.observe(inv)  # `sky queue` fails
    assert seen.sight is Sight.UNREACHABLE and "ApiServerConnectionError" in seen.evidence
    inv = engine.advance(inv, seen)  # (a lookup past the unreachable timeout fails too)
    assert (inv.state, inv.attempt) == (meanwhile, 1)
    gate.touch()
    inv = drive(engine, inv, DriveOptions())
    assert (inv.outcome, inv.exit_code, inv.attempt) == (Outcome.COMPLETED, 0, 1)
    assert len(fake.calls("exec")) == 1 and len(fake.calls("launch")) == 1
