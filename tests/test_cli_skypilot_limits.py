"""A SkyPilot profile asking more time than the partitions allow, on the scripted fake `sky`:
refused before the launch (MISCONFIGURED, exit 78) when sinfo proves it, and when only Slurm's
refusal at launch tells, read as the request's fault (REJECTED, exit 2): never an outage
retried until TRANSPORT_LOST (exit 75)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import vibesys_cli
from tests.helpers.skyfake import FakeSky, make_fake_sky


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeSky]:
    sky = make_fake_sky(tmp_path)
    yield sky
    sky.stop_jobs()


def run(fake: FakeSky, tmp_path: Path, **profile: object) -> tuple[int, str, dict[str, Any]]:
    """`vibesys run --json` of `true` with a profile so changed: status, stderr, the invocation."""
    config = fake.clusters_config(**profile)
    done = vibesys_cli(
        "run", "--adapter", "skypilot", "--profile", "test", "--run-id", "campaign-1",
        "--clusters-config", str(config), "--retry-delay", "0", "--json", "--", "true",
        cwd=tmp_path, env=fake.env(),
    )  # fmt: skip
    return done.returncode, done.stderr, json.loads(done.stdout)


def test_an_allocation_no_partition_allows_is_refused_before_the_launch(
    fake: FakeSky, tmp_path: Path
) -> None:
    """main allows 30 minutes, priority 2 hours (the fake login node's sinfo): 99 days fits
    neither, whichever SkyPilot would pick for an infra naming no partition."""
    code, err, shown = run(fake, tmp_path, allocation_time="99-00:00:00")
    assert code == 78, err
    assert (shown["state"], shown["outcome"]) == ("DONE", "MISCONFIGURED")
    assert len(shown["attempts"]) == 1 and shown["retries"] == 0
    said = json.dumps(shown)
    assert (
        "allocation_time 99-00:00:00 of [profiles.test] exceeds the MaxTime of every partition "
        "it may use (main MaxTime 30 min, priority MaxTime 120 min): nothing launched"
    ) in said
    assert "lower allocation_time of [profiles.test] in clusters.toml" in said
    assert fake.calls("launch") == [], "nothing may be launched"


def test_the_partition_infra_names_is_the_one_compared(fake: FakeSky, tmp_path: Path) -> None:
    code, _, shown = run(fake, tmp_path, infra="slurm/localslurm/main", allocation_time="01:00:00")
    assert (code, shown["outcome"]) == (78, "MISCONFIGURED")
    assert "partition main's MaxTime (30 min)" in json.dumps(shown)
    assert fake.calls("launch") == []
    # An hour fits priority: launched and run.
    code, err, shown = run(
        fake, tmp_path, infra="slurm/localslurm/priority", allocation_time="01:00:00"
    )
    assert (code, shown["outcome"]) == (0, "COMPLETED"), err
    assert len(fake.calls("launch")) == 1


def test_a_launch_slurm_refuses_for_its_time_is_rejected_not_retried(
    fake: FakeSky, tmp_path: Path
) -> None:
    """sinfo fails (nothing proven before the launch); the allocation's sbatch is then refused
    by Slurm for its time: the request's fault, one launch, no retry."""
    fake.control("fake-sinfo", "")
    fake.control("fake-maxtime", "10")
    code, err, shown = run(fake, tmp_path)
    assert code == 2, err
    assert (shown["state"], shown["outcome"]) == ("DONE", "REJECTED")
    assert shown["failure_class"] != "TRANSPORT_LOST" and shown["retries"] == 0
    assert len(shown["attempts"]) == 1
    said = json.dumps(shown)
    assert "Slurm refused the allocation of cluster" in said
    assert "Requested time limit is invalid (missing or exceeds some limit)" in said
    assert len(fake.calls("launch")) == 1, "a refusal is never launched again"
    listed = vibesys_cli("clusters", "--json", cwd=tmp_path)
    [lease] = json.loads(listed.stdout)["clusters"]
    assert lease["state"] == "failed", lease
