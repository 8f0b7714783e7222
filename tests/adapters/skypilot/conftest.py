from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from vibesys.adapters.base import TERMINAL_REMOTE, JobRef, RemoteStatus, SubmitRequest
from vibesys.adapters.skypilot.backend import SkyPilotBackend
from vibesys.adapters.skypilot.boundary import SkyCli
from vibesys.adapters.skypilot.ops import SkyOps
from vibesys.adapters.skypilot.rundirs import RunDirs
from vibesys.adapters.transports import LocalTransport
from vibesys.config.resources import PortableResources, SkyPilotProfile, resolve_resources

FAKE_SKY = Path(__file__).with_name("fake_sky.py")


def profile(root: Path, **changes: object) -> SkyPilotProfile:
    values: dict[str, object] = {
        "runner": "skypilot",
        "infra": "slurm/localslurm",
        "cpus_per_node": 1,
        "allocation_time": "00:20:00",
        "remote_artifact_root": str(root),
    }
    values.update(changes)
    return SkyPilotProfile.model_validate(values)


@dataclass
class FakeSky:
    """A fake SkyPilot installation (venv with bin/sky) and its state."""

    venv: Path
    state: Path
    remote: Path
    local: Path
    version: str = "0.14.1"

    def cli(self) -> SkyCli:
        env = {"FAKE_SKY_STATE": str(self.state), "FAKE_SKY_VERSION": self.version}
        return SkyCli(venv=self.venv, env=env, timeout=60)

    def backend(self, run_id: str = "campaign-1", **profile_changes: object) -> SkyPilotBackend:
        effective = resolve_resources(
            PortableResources(), profile(self.remote, **profile_changes), "test"
        )
        return SkyPilotBackend(
            effective=effective,
            run_id=run_id,
            ops=SkyOps(self.cli()),
            dirs=RunDirs(LocalTransport(env=self.login_env()), str(self.remote)),
            state_dir=self.local / "state",
        )

    def login_env(self) -> dict[str, str]:
        """The "login node": this host, with the fake's squeue first on PATH."""
        path = f"{self.venv / 'fakebin'}:{os.environ['PATH']}"
        return {**os.environ, "PATH": path, "FAKE_SKY_STATE": str(self.state)}

    def calls(self, command: str | None = None) -> list[list[str]]:
        path = Path(f"{self.state}.calls")
        lines = path.read_text().splitlines() if path.exists() else []
        found = [json.loads(line) for line in lines]
        return [c for c in found if command is None or (c and c[0] == command)]

    def control(self, *argv: str) -> None:
        self.cli().run(list(argv))

    def cluster_state(self, name: str) -> dict[str, object] | None:
        data = json.loads(self.state.read_text()) if self.state.exists() else {"clusters": {}}
        found: dict[str, object] | None = data["clusters"].get(name)
        return found


@pytest.fixture
def fake_sky(tmp_path: Path) -> Iterator[FakeSky]:
    venv = tmp_path / "sky-venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "fakebin").mkdir()
    for shim, mode in (
        ("bin/sky", ""),
        ("bin/python", "--helper "),
        ("fakebin/squeue", "--squeue "),
    ):
        path = venv / shim
        path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_SKY}" {mode}"$@"\n')
        path.chmod(0o755)
    fake = FakeSky(venv, tmp_path / "fake-state.json", tmp_path / "remote", tmp_path / "local")
    yield fake
    # No job of the fake outlives its test.
    data = json.loads(fake.state.read_text()) if fake.state.exists() else {"clusters": {}}
    for cluster in data["clusters"].values():
        for job in cluster["jobs"]:
            try:
                import os
                import signal

                os.killpg(job["pid"], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def request(fake: FakeSky, invocation: str, attempt: int, command: Sequence[str]) -> SubmitRequest:
    name = f"vibesys-{invocation}-{attempt}"
    run_dir = fake.local / invocation / str(attempt)
    return SubmitRequest(invocation, attempt, name, tuple(command), run_dir)


def ref(req: SubmitRequest, job_id: str | None) -> JobRef:
    return JobRef(req.job_name, job_id, req.run_dir, None, req.invocation_id, req.attempt)


def wait_terminal(backend: SkyPilotBackend, job: JobRef, rounds: int = 300) -> RemoteStatus:
    for _ in range(rounds):
        status = backend.status([job])[job.job_name]
        if status.state in TERMINAL_REMOTE:
            return status
        time.sleep(0.1)
    raise AssertionError(f"{job.job_name} did not end: {status}")
