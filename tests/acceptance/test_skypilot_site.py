"""Live acceptance on a real site (opt-in; docs/skypilot.md, "Live acceptance on a real cluster").

Runs only when VIBESYS_SKY_ACCEPTANCE_PROFILE names an operator profile (clusters.toml, or the
file in VIBESYS_CLUSTERS_CONFIG); SkyPilot must already reach the site (`sky check`), with the
environment the operator uses for vibesys (VIBESYS_SKY_VENV, VIBESYS_SKY_HOME, ...). Through
`vibesys` itself: launch, two evaluations on one allocation (exit 0, then exit 3 recorded as 3),
a forced expiry (scancel of the holding allocation through the login node) and recovery on a new
allocation, release. Optional: VIBESYS_SKY_ACCEPTANCE_COMMAND (a shell command run as the first
evaluation, e.g. a GPU smoke test; default `true`).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import vibesys_cli

PROFILE = os.environ.get("VIBESYS_SKY_ACCEPTANCE_PROFILE")
WAIT = float(os.environ.get("VIBESYS_SKY_ACCEPTANCE_WAIT", "3600"))

pytestmark = [
    pytest.mark.skypilot_acceptance,
    pytest.mark.skipif(not PROFILE, reason="opt-in: set VIBESYS_SKY_ACCEPTANCE_PROFILE"),
    pytest.mark.timeout(4 * WAIT),
]


def _vibesys(cwd: Path, *args: str) -> Any:
    done = vibesys_cli(*args, cwd=cwd, timeout=WAIT)
    return done


def test_campaign_on_a_real_site(tmp_path: Path) -> None:
    assert PROFILE is not None
    run = ["run", "--adapter", "skypilot", "--profile", PROFILE, "--retry-delay", "0"]
    run += ["--run-id", f"acceptance-{uuid.uuid4().hex[:8]}"]
    if os.environ.get("VIBESYS_CLUSTERS_CONFIG"):
        run += ["--clusters-config", os.environ["VIBESYS_CLUSTERS_CONFIG"]]
    smoke = os.environ.get("VIBESYS_SKY_ACCEPTANCE_COMMAND", "true")
    try:
        ok = _vibesys(tmp_path, *run, "--json", "--", "sh", "-c", smoke)
        assert ok.returncode == 0, ok.stderr
        bad = _vibesys(tmp_path, *run, "--json", "--", "sh", "-c", "exit 3")
        assert bad.returncode == 3, bad.stderr
        allocations = [
            json.loads(done.stdout)["attempts"][0]["provenance"]["allocation_job_id"]
            for done in (ok, bad)
        ]
        assert allocations[0] == allocations[1]  # one allocation for both

        detached = _vibesys(tmp_path, *run, "--detach", "--", "sh", "-c",
                            'case "$PWD" in */2/work) exit 0 ;; esac; sleep 3600')  # fmt: skip
        victim = detached.stdout.split()[0]
        deadline = time.monotonic() + WAIT
        while "started_at" not in _attempt(tmp_path, victim).get("provenance", {}):
            assert time.monotonic() < deadline, "the evaluation never started"
            _vibesys(tmp_path, "reconcile")
            time.sleep(10)
        _scancel_on_the_login_node(allocations[0])
        recovered = _vibesys(tmp_path, "wait", victim, "--json")
        assert recovered.returncode == 0, recovered.stderr
        attempts = json.loads(recovered.stdout)["attempts"]
        assert [a["failure_class"] for a in attempts] == ["ALLOCATION_EXPIRED", "COMPLETED"]
        assert attempts[1]["provenance"]["allocation_job_id"] != allocations[0]
    finally:
        live = _vibesys(tmp_path, "clusters", "--json", "--live").stdout
        for lease in json.loads(live or '{"clusters": []}')["clusters"]:
            _vibesys(tmp_path, "clusters", "release", str(lease["id"]))
    leases = json.loads(_vibesys(tmp_path, "clusters", "--json").stdout)["clusters"]
    states = [lease["state"] for lease in leases]
    assert states == ["lost", "released"]


def _attempt(cwd: Path, invocation: str) -> dict[str, Any]:
    shown = json.loads(_vibesys(cwd, "journal", "show", invocation, "--json").stdout)
    found: dict[str, Any] = shown["attempts"][-1] if shown["attempts"] else {}
    return found


def _scancel_on_the_login_node(allocation: str) -> None:
    from vibesys.adapters.skypilot.environment import SkyEnvironment
    from vibesys.adapters.skypilot.login import login_runner
    from vibesys.config.profiles import load_clusters_config, select_profile

    assert PROFILE is not None
    config = load_clusters_config(os.environ.get("VIBESYS_CLUSTERS_CONFIG"))
    infra = select_profile(config, PROFILE).infra
    runner = login_runner(infra, SkyEnvironment.from_environ().client_home())
    done = runner.run(["scancel", allocation], timeout=60)
    assert done.returncode == 0, done.evidence()
