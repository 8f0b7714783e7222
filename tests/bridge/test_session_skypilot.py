"""`vibesys session serve --profile` on the scripted fake `sky`: the bridge names the
campaign's cluster itself (run id + resources' fingerprint), evaluations of the session run on
it (launched once, reused), the result says where; teardown keeps the cluster, `--down`
releases it."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bridge.session_helpers import BUDGET, result_line, serve_argv, start_session
from tests.skyfake import FakeSky, make_fake_sky
from vibesys.adapters.skypilot.naming import cluster_name
from vibesys.config import PortableResources, resolve_resources
from vibesys.config.resources import SkyPilotProfile

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeSky]:
    sky = make_fake_sky(tmp_path)
    yield sky
    sky.stop_jobs()


def expected_cluster(fake: FakeSky, config: Path) -> str:
    profile = SkyPilotProfile.model_validate(_profile_table(config))
    return cluster_name("campaign-1", resolve_resources(PortableResources(), profile, "test"))


def _profile_table(config: Path) -> dict[str, object]:
    import tomllib

    table: dict[str, object] = tomllib.loads(config.read_text())["profiles"]["test"]
    return table


def test_a_session_on_a_campaign_cluster(fake: FakeSky, tmp_path: Path) -> None:
    config = fake.clusters_config()
    site = ("--profile", "test", "--clusters-config", str(config))
    session = start_session(tmp_path, *site, env=fake.env())
    name = expected_cluster(fake, config)
    try:
        assert (session.document["backend"], session.document["cluster"]) == ("skypilot", name)
        rc, out, err = session.evaluate("--", "sh", "-c", "echo first")
        assert rc == 0, err
        first = result_line(out)
        assert (first["status"], first["cluster_name"]) == ("COMPLETED", name)
        assert first["remote_job_id"].endswith("@" + first["provenance"]["allocation_job_id"])
        rc, out, err = session.evaluate("--", "sh", "-c", "exit 3")
        second = result_line(out)
        assert (rc, second["status"], second["cluster_name"]) == (3, "APPLICATION_FAILED", name)
        assert len(fake.calls("launch")) == 1  # one allocation for the campaign
        caps = session.helper("capabilities")
        printed, _ = caps.communicate(timeout=BUDGET)
        capabilities = json.loads(printed)
        assert capabilities["cluster"] == name and capabilities["cpus_per_node"] == 1
        assert capabilities["allocation_time"] == "00:20:00"
    finally:
        status, err = session.stop()
    assert status == 0, err
    assert fake.calls("down") == [] and fake.cluster_state(name) is not None  # kept

    # The campaign's next session finds the same cluster; --down ends it at teardown.
    again = start_session(tmp_path, *site, extra=("--down",), env=fake.env())
    rc, out, err = again.evaluate("--", "true")
    assert rc == 0 and result_line(out)["cluster_name"] == name, err
    status, err = again.stop()
    assert status == 0, err
    assert f"released cluster {name}" in err
    assert len(fake.calls("launch")) == 1 and len(fake.calls("down")) == 1


def test_a_skypilot_session_carries_no_variables_yet(fake: FakeSky, tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    config = fake.clusters_config()
    argv = serve_argv(
        tmp_path,
        "--profile",
        "test",
        "--clusters-config",
        str(config),
        extra=("--allow-env", "SEED"),
    )
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=BUDGET,
        check=False,
        env={**os.environ, **fake.env()},
    )
    assert done.returncode == 2
    assert "--allow-env: the SkyPilot path does not carry variables to the job yet" in done.stderr
