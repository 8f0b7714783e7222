"""The scripted fake `sky` (tests/fake_sky.py) as a SkyPilot installation for tests: a venv
with `bin/sky`, `bin/python` (the SDK helper), a `squeue`, a `sacct` and a `sinfo` for the
"login node" (this host), its state file, and helpers to build the adapter on it, directly or
through the registry."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec

from vibesys.adapters.base import TERMINAL_REMOTE, JobContext, JobRef, RemoteStatus, Submission
from vibesys.adapters.skypilot import SkyEnvironment, SkyPilotBackend, build_backend
from vibesys.adapters.skypilot.boundary import SkyCli
from vibesys.adapters.skypilot.ops import SkyOps
from vibesys.adapters.skypilot.request import SkyPilotRequest
from vibesys.adapters.skypilot.run_dirs import RunDirs
from vibesys.adapters.transports import LocalTransport
from vibesys.config.resources import PortableResources, SkyPilotProfile, resolve_resources

FAKE_SKY = Path(__file__).resolve().parents[1] / "fake_sky.py"
#: Status rounds of the fake take milliseconds: poll as fast as the engine allows.
FAST_POLL = (0.05, 0.05)


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


def profile_toml(root: Path, name: str = "test", **changes: object) -> str:
    """clusters.toml text with one profile like `profile()`."""
    values = profile(root, **changes).model_dump(exclude_defaults=True)
    values["runner"] = "skypilot"
    lines = [f"[profiles.{name}]"] + [f"{key} = {json.dumps(v)}" for key, v in values.items()]
    return "\n".join(lines) + "\n"


class FakeSky(msgspec.Struct):
    """A fake SkyPilot installation (venv with bin/sky) and its state."""

    venv: Path
    state: Path
    remote: Path
    local: Path
    version: str = "0.14.1"

    def env(self) -> dict[str, str]:
        """What a vibesys process needs to use this fake through the registry."""
        return {
            "FAKE_SKY_STATE": str(self.state),
            "FAKE_SKY_VERSION": self.version,
            "VIBESYS_SKY_VENV": str(self.venv),
            "VIBESYS_SKY_LOGIN": "local",
            # The "login node" is this host, with the fake's squeue and sacct first on PATH.
            "PATH": f"{self.venv / 'fakebin'}:{os.environ['PATH']}",
        }

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
            dirs=RunDirs(LocalTransport(env={**os.environ, **self.env()}), str(self.remote)),
            poll_seconds=FAST_POLL,
        )

    def clusters_config(self, **profile_changes: object) -> Path:
        path = self.local / "clusters.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(profile_toml(self.remote, **profile_changes))
        return path

    def request(self, run_id: str = "campaign-1", **fields: object) -> SkyPilotRequest:
        return SkyPilotRequest.checked(
            clusters_config=str(self.clusters_config()), profile="test", run_id=run_id, **fields
        )

    def registry_backend(self, request: SkyPilotRequest) -> SkyPilotBackend:
        """What the registry builds for `request`, in an environment pointing at this fake."""
        env = {**os.environ, **self.env()}
        environment = SkyEnvironment.from_environ(env)
        backend = build_backend(
            request, environment, files=LocalTransport(env=env), poll_seconds=FAST_POLL
        )
        # In a vibesys process these come from its environment; in this one, from here.
        backend.ops.cli.env = {**backend.ops.cli.env, **self.cli().env}
        return backend

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

    def stop_jobs(self) -> None:
        """No job of the fake outlives its test."""
        data = json.loads(self.state.read_text()) if self.state.exists() else {"clusters": {}}
        for cluster in data["clusters"].values():
            for job in cluster["jobs"]:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(job["pid"], signal.SIGKILL)


def make_fake_sky(tmp_path: Path) -> FakeSky:
    venv = tmp_path / "sky-venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "fakebin").mkdir()
    for shim, mode in (
        ("bin/sky", ""),
        ("bin/python", "--helper "),
        ("fakebin/squeue", "--squeue "),
        ("fakebin/sacct", "--sacct "),
        ("fakebin/sinfo", "--sinfo "),
    ):
        path = venv / shim
        path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_SKY}" {mode}"$@"\n')
        path.chmod(0o755)
    return FakeSky(venv, tmp_path / "fake-state.json", tmp_path / "remote", tmp_path / "local")


def submit_request(
    fake: FakeSky, invocation: str, attempt: int, command: Sequence[str], **fields: object
) -> Submission[SkyPilotRequest]:
    name = f"vibesys-{invocation}-{attempt}"
    attempt_dir = fake.local / invocation / str(attempt)
    request = fake.request(**fields)
    context = JobContext(str(fake.local))
    return Submission(invocation, attempt, name, tuple(command), attempt_dir, context, request)


def ref(req: Submission[SkyPilotRequest], job_id: str | None) -> JobRef:
    return JobRef(req.job_name, job_id, req.attempt_dir, None, req.invocation_id, req.attempt)


def wait_terminal(backend: SkyPilotBackend, job: JobRef, rounds: int = 300) -> RemoteStatus:
    for _ in range(rounds):
        status = backend.status([job])[job.job_name]
        if status.state in TERMINAL_REMOTE:
            return status
        time.sleep(0.1)
    raise AssertionError(f"{job.job_name} did not end: {status}")
