"""A journal that fails under an effect passes every error boundary of the engine: it is not
the effect's failure (a collection to retry, a submit that may have gone through), and nothing
more can be recorded, so the driver stops at once and `run` says so (status 73). Against the
scripted FakeBackend; the real faults are tests/test_journal_faults.py."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from vibesys.adapters.base import RemoteState
from vibesys.adapters.fake import FakeAttempt, FakeBackend
from vibesys.engine import DriveOptions, Engine, RetryPolicy, clusters, drive, execute
from vibesys.errors import JournalFault
from vibesys.journal_schema import Journal
from vibesys.states import JobState

S = RemoteState


def fault(*_args: object, **_kw: object) -> None:
    raise JournalFault("the journal j.db cannot be written: its disk is full")


@pytest.mark.parametrize(
    ("module", "where", "stops_in"),
    [
        (execute, "spool_gathered", JobState.COLLECTING),  # bringing the logs home
        (
            clusters,
            "hold_lease",
            JobState.SUBMITTING,
        ),  # recording a cluster lease before the submit
    ],
)
def test_a_journal_fault_in_an_effect_stops_the_driver(
    journal: Journal,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    module: ModuleType,
    where: str,
    stops_in: JobState,
) -> None:
    fake = FakeBackend([FakeAttempt((S.RUNNING, S.COMPLETED), exit_code=0)])
    engine = Engine(journal, lambda name, options: fake, retry=RetryPolicy(0, 0.0))  # type: ignore[arg-type]
    inv = engine.prepare(adapter="fake", command=["x"], run_root=tmp_path / "runs")
    monkeypatch.setattr(module, where, fault)
    with pytest.raises(JournalFault, match="its disk is full"):
        drive(engine, inv, DriveOptions())
    after = journal.invocations.get(inv.id)
    assert after.state is stops_in  # nothing recorded past the effect the fault stopped
    assert inv.id not in engine.notes  # not read as the effect's own failure
