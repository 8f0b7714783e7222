"""The SkyPilot engine tests' fake `sky` (scripted: its outputs copy the real ones; jobs really
run) and an engine on it, with a foreground run and the attempts whose command started."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.skyfake import FakeSky, make_fake_sky
from vibesys.adapters.skypilot.request import SkyPilotRequest
from vibesys.engine import DriveOptions, Engine, RetryPolicy, drive
from vibesys.journal_schema import Invocation, open_journal


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeSky]:
    sky = make_fake_sky(tmp_path)
    yield sky
    sky.stop_jobs()


def engine_on(fake: FakeSky, tmp_path: Path, owner: str = "host:1:1") -> Engine:
    return Engine(
        open_journal(tmp_path / "journal.db"),
        lambda adapter, request: fake.registry_backend(request),  # type: ignore[arg-type]
        retry=RetryPolicy(max_retries=2, initial_delay_seconds=0.0),
        owner=owner,
    )


def run(engine: Engine, request: SkyPilotRequest, command: list[str], tmp_path: Path) -> Invocation:
    inv = engine.prepare(
        adapter="skypilot", command=command, request=request, run_root=tmp_path / "runs"
    )
    return drive(engine, inv, DriveOptions())


def job_claims(fake: FakeSky) -> list[str]:
    """Attempts whose command started (their remote attempt directory holds the job's own claim)."""
    return sorted(
        str(path.parent.relative_to(fake.remote))
        for path in fake.remote.glob("*/*/claim")
        if path.read_text().startswith("kind=job")
    )
