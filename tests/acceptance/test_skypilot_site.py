"""Live acceptance on a real site (opt-in; docs/skypilot.md, "Live acceptance on a real cluster").

Runs only when VIBESYS_SKY_ACCEPTANCE_PROFILE names an operator profile (clusters.toml, or
VIBESYS_CLUSTERS_CONFIG); SkyPilot must already be able to reach the site (`sky check`). The
campaign: launch, two evaluations on one allocation (exit 0, then exit 3 recorded as 3), a forced
expiry (scancel of the holding allocation through the login node) and recovery on a new
allocation, then teardown. Optional: VIBESYS_SKY_ACCEPTANCE_COMMAND (a shell command run as
the first evaluation, e.g. a GPU smoke test; default `true`).
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from vibesys.adapters.base import TERMINAL_REMOTE, JobRef, RemoteState, RemoteStatus, SubmitRequest
from vibesys.adapters.skypilot import SkyPilotBackend, SkyPilotRequest, build_backend
from vibesys.adapters.skypilot.lease import LeaseAction
from vibesys.config.resources import PortableResources

PROFILE = os.environ.get("VIBESYS_SKY_ACCEPTANCE_PROFILE")

pytestmark = [
    pytest.mark.skypilot_acceptance,
    pytest.mark.skipif(not PROFILE, reason="opt-in: set VIBESYS_SKY_ACCEPTANCE_PROFILE"),
]


def _wait(backend: SkyPilotBackend, job: JobRef, states: frozenset[RemoteState]) -> RemoteStatus:
    deadline = time.monotonic() + float(os.environ.get("VIBESYS_SKY_ACCEPTANCE_WAIT", "1800"))
    while time.monotonic() < deadline:
        status = backend.status([job])[job.job_name]
        if status.state in states:
            return status
        time.sleep(backend.poll_interval(0))
    raise AssertionError(f"{job.job_name} never reached {sorted(states)}: {status}")


def _submit(backend: SkyPilotBackend, tmp: Path, inv: str, command: list[str]) -> JobRef:
    name = f"vibesys-{inv}-1"
    request = SubmitRequest(inv, 1, name, tuple(command), tmp / inv)
    return JobRef(name, backend.submit(request).job_id, tmp / inv, None, inv, 1)


def test_campaign_on_a_real_site(tmp_path: Path) -> None:
    assert PROFILE is not None
    run_id = f"acceptance-{uuid.uuid4().hex[:8]}"
    request = SkyPilotRequest(profile=PROFILE, run_id=run_id, resources=PortableResources())
    backend = build_backend(
        request,
        state_dir=tmp_path / "state",
        clusters_config=os.environ.get("VIBESYS_CLUSTERS_CONFIG"),
    )
    backend.check_version()
    try:
        first = backend.launch(backend.plan_lease())
        assert first.launched and first.allocation
        smoke = os.environ.get("VIBESYS_SKY_ACCEPTANCE_COMMAND", "true")
        ok = _submit(backend, tmp_path, "acc-ok", ["sh", "-c", smoke])
        assert _wait(backend, ok, TERMINAL_REMOTE).state is RemoteState.COMPLETED
        bad = _submit(backend, tmp_path, "acc-bad", ["sh", "-c", "exit 3"])
        failed = _wait(backend, bad, TERMINAL_REMOTE)
        assert (failed.state, failed.exit_code) == (RemoteState.FAILED, 3)
        assert backend.provenance(ok).allocation_job_id == backend.provenance(bad).allocation_job_id

        victim = _submit(backend, tmp_path, "acc-expiry", ["sleep", "3600"])
        _wait(backend, victim, frozenset({RemoteState.RUNNING}))
        scancel = backend.dirs.runner.run(["scancel", first.allocation[0]], timeout=60)
        assert scancel.returncode == 0, scancel.evidence()
        assert _wait(backend, victim, TERMINAL_REMOTE).state is RemoteState.ALLOCATION_EXPIRED
        plan = backend.plan_lease()
        assert plan.action is LeaseAction.LAUNCH
        second = backend.launch(plan)
        assert second.allocation != first.allocation
        again = _submit(backend, tmp_path, "acc-recovered", ["sh", "-c", "exit 0"])
        assert _wait(backend, again, TERMINAL_REMOTE).state is RemoteState.COMPLETED
    finally:
        backend.release()
    assert backend.inspect(refresh=True) is None
