"""SkyPilot's ssh to the login node refused (an expired certificate) through the engine: a
submission is MISCONFIGURED with nothing launched or executed; a running job is left alone,
its observation naming the refused login and its fix, and carried on once the login works."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from tests.engine.skypilot.conftest import engine_on, run
from tests.helpers.skyfake import FakeSky
from vibesys.engine import DriveOptions, drive
from vibesys.engine.seen import Sight
from vibesys.states import JobState, Outcome


def test_a_submission_whose_ssh_is_refused_is_misconfigured_and_runs_nothing(
    fake: FakeSky, tmp_path: Path
) -> None:
    engine = engine_on(fake, tmp_path)
    fake.control("fake-ssh-refused", "1")
    inv = run(engine, fake.request(), ["true"], tmp_path)
    assert (inv.state, inv.outcome) == (JobState.DONE, Outcome.MISCONFIGURED)
    [row] = [h for h in engine.journal.invocations.history(inv.id) if h.event == "Misconfigured"]
    assert "login refused: the login's key was not accepted" in row.evidence["reason"]
    assert "Permission denied (publickey)" in row.evidence["reason"]
    assert fake.calls("launch") == [] and fake.calls("exec") == []


def test_a_running_job_behind_a_refused_ssh_is_left_alone_and_carried_on(
    fake: FakeSky, tmp_path: Path
) -> None:
    engine = engine_on(fake, tmp_path)
    engine.unreachable_timeout = timedelta(minutes=10)
    gate = tmp_path / "gate"
    inv = engine.prepare(
        adapter="skypilot",
        command=["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.1; done; echo through"],
        request=fake.request(),
        run_root=tmp_path / "runs",
    )
    inv = drive(engine, inv, DriveOptions(detach=True))
    fake.control("fake-ssh-refused", "1")
    seen = engine.observe(inv)
    assert seen is not None and seen.sight is Sight.UNREACHABLE
    assert "login refused" in seen.evidence and "authorized_keys" in seen.fix
    inv = engine.advance(inv, seen)
    assert (inv.state, inv.attempt) == (JobState.RUNNING, 1)
    gate.touch()
    inv = drive(engine, inv, DriveOptions())
    assert (inv.outcome, inv.attempt) == (Outcome.COMPLETED, 1)
    assert len(fake.calls("exec")) == 1
