"""A cluster's launch and release are effects a live process carries out: frozen (SIGSTOP) in the
middle of one, it keeps its lease, and neither `reconcile` nor anything else launches or tears
the cluster down in its place; thawed, it finishes alone. On the scripted fake `sky`, through the
real command line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cli import vibesys_cli
from tests.helpers.hang_guard import wait_until
from tests.helpers.skyfake import FakeSky, make_fake_sky


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeSky]:
    sky = make_fake_sky(tmp_path)
    yield sky
    sky.stop_jobs()


def start_run(fake: FakeSky, tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    argv = [
        *("run", "--adapter", "skypilot", "--profile", "test", "--run-id", "campaign-1"),
        *("--clusters-config", str(fake.clusters_config()), *args),
    ]
    return subprocess.Popen(
        [sys.executable, "-m", "vibesys", *argv, "--", "echo", "ran"],
        cwd=tmp_path,
        env={**os.environ, **fake.env()},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def leases(fake: FakeSky, tmp_path: Path) -> list[dict[str, object]]:
    shown = vibesys_cli("clusters", "--json", cwd=tmp_path, env=fake.env())
    assert shown.returncode == 0, shown.stderr
    found: list[dict[str, object]] = json.loads(shown.stdout)["clusters"]
    return found


def frozen_while(
    run: subprocess.Popen[str], fake: FakeSky, tmp_path: Path, seconds: float
) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    """Freeze `run`, let `seconds` pass (its sky command finishes meanwhile), run `reconcile`
    beside it, and read the lease, then thaw it: reconcile's answer and the lease as it was."""
    os.kill(run.pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
        reconciled = vibesys_cli("reconcile", cwd=tmp_path, env=fake.env())
        [lease] = leases(fake, tmp_path)
        return reconciled, lease
    finally:
        os.kill(run.pid, signal.SIGCONT)


def test_a_launcher_frozen_mid_launch_keeps_its_lease_and_finishes_alone(
    fake: FakeSky, tmp_path: Path
) -> None:
    fake.control("fake-stall-launch", "2")
    run = start_run(fake, tmp_path)
    wait_until(lambda: fake.calls("launch"), 30, "the launch under way")
    [lease] = leases(fake, tmp_path)
    assert lease["state"] == "launching"
    reconciled, after = frozen_while(run, fake, tmp_path, 2.5)
    assert reconciled.returncode == 0, reconciled.stderr
    assert "left alone: leased by live" in reconciled.stdout
    # The launch ended in the control plane while its launcher was frozen: still its to record.
    assert (after["state"], after["owner"]) == ("launching", lease["owner"])
    assert len(fake.calls("launch")) == 1 and not fake.calls("down")
    out, err = run.communicate(timeout=60)
    assert (run.returncode, out) == (0, "ran\n"), err
    [done] = leases(fake, tmp_path)
    assert done["state"] == "up"
    assert len(fake.calls("launch")) == 1 and not fake.calls("down")


def test_a_releaser_frozen_mid_release_keeps_its_lease_and_finishes_alone(
    fake: FakeSky, tmp_path: Path
) -> None:
    fake.control("fake-stall-down", "2")
    run = start_run(fake, tmp_path, "--down")
    wait_until(lambda: fake.calls("down"), 30, "the release under way")
    [lease] = leases(fake, tmp_path)
    assert lease["state"] == "releasing"
    reconciled, after = frozen_while(run, fake, tmp_path, 2.5)
    assert reconciled.returncode == 0, reconciled.stderr
    assert (after["state"], after["owner"]) == ("releasing", lease["owner"])
    assert len(fake.calls("down")) == 1
    out, err = run.communicate(timeout=60)
    assert (run.returncode, out) == (0, "ran\n"), err
    [done] = leases(fake, tmp_path)
    assert done["state"] == "released"
    assert len(fake.calls("launch")) == 1 and len(fake.calls("down")) == 1
