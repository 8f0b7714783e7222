"""`vibesys session serve --profile` on the scripted fake `sky`: the bridge names the
campaign's cluster itself (run id + resources' fingerprint), evaluations of the session run on
it (launched once, reused), the result says where; teardown keeps the cluster, `--down`
releases it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bridge.session_helpers import BUDGET, result_line, serve_argv, start_session
from tests.helpers.skyfake import FakeSky, make_fake_sky
from vibesys.adapters.skypilot.naming import cluster_name
from vibesys.config.resources import PortableResources, SkyPilotProfile, resolve_resources

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
        # The agent edits its candidate between evaluations: the next runs the edit.
        (tmp_path / "ws" / "main.py").write_text("print('edited')\n")
        rc, out, err = session.evaluate("--", "sh", "-c", "cat main.py; exit 3")
        second = result_line(out)
        assert (rc, second["status"], second["cluster_name"]) == (3, "APPLICATION_FAILED", name)
        assert out.startswith("print('edited')\n"), err
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


def test_a_skypilot_job_gets_the_passed_variables_only(fake: FakeSky, tmp_path: Path) -> None:
    config = fake.clusters_config()
    site = ("--profile", "test", "--clusters-config", str(config))
    secret = "s3cret-value-of-the-helper"
    # The session's own environment has a variable the job must not see.
    env = {**fake.env(), "HOST_ONLY": "host-value"}
    session = start_session(tmp_path, *site, extra=("--allow-env", "API_KEY"), env=env)
    try:
        # The job shows a digest of what it got (its output is kept, the value must not be).
        script = 'printf %s "$API_KEY" | sha256sum; echo "host=${HOST_ONLY:-unset}"'
        argv = ("--env", "API_KEY", "--", "sh", "-c", script)
        rc, out, err = session.evaluate(*argv, API_KEY=secret)
        assert rc == 0, err
        digest = hashlib.sha256(secret.encode()).hexdigest()
        assert out.splitlines()[:2] == [f"{digest}  -", "host=unset"]
        assert result_line(out)["status"] == "COMPLETED"
    finally:
        status, err = session.stop()
    assert status == 0, err
    # The value went to `sky exec` through its environment: by name on its command line.
    (call,) = fake.calls("exec")
    assert call[call.index("--secret") + 1] == "API_KEY" and secret not in json.dumps(call)
    # Only the recorded environment (owner-only) holds it: not the journal (its request, the
    # evidence), the task file or the logs.
    state = [tmp_path / ".vibesys", tmp_path / "state"]
    files = [f for root in state for f in root.rglob("*") if f.is_file() and not f.is_socket()]
    holding = [f.name for f in files if secret.encode() in f.read_bytes()]
    assert holding == ["context.env.json"]
    assert any(f.name == "task.json" for f in files)


def test_a_skypilot_session_refuses_variables_the_client_reads(
    fake: FakeSky, tmp_path: Path
) -> None:
    (tmp_path / "ws").mkdir()
    config = fake.clusters_config()
    argv = serve_argv(
        tmp_path,
        "--profile",
        "test",
        "--clusters-config",
        str(config),
        extra=("--allow-env", "PYTHONPATH"),
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
    assert "--allow-env PYTHONPATH: the SkyPilot client reads it" in done.stderr
