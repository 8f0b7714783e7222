"""The SkyPilot adapter end to end against the real pinned SkyPilot (0.14.1) on the project's
local Slurm cluster over SSH (127.0.0.1:2222).

The module sets up exactly what SkyPilot needs (scripts/skypilot-live setup: a throwaway client
HOME, uv, python3.10, SSL_CERT_FILE; every changed file of the account backed up), starts its
own API server, and afterwards undoes it all (teardown) and checks that no SkyPilot process and
no Slurm job of its clusters is left and that the account's files are as they were.

One campaign: launch, two evaluations on one allocation (exit 0, and exit 3 with the true code),
a running job found again by name from a fresh adapter (no second exec), a lost allocation
(scancel of the holding job) then recovery on a new allocation, a fenced attempt that refuses
to run, cancel without release, release. Budget (measured, 2 CPUs): about 8 minutes with the
SkyPilot venv already installed, plus about 1 minute to install it.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from vibesys.adapters.base import TERMINAL_REMOTE, JobRef, RemoteState, RemoteStatus, SubmitRequest
from vibesys.adapters.skypilot import SkyPilotBackend, SkyPilotRequest, build_backend
from vibesys.adapters.skypilot.lease import LeaseAction
from vibesys.adapters.skypilot.parse import exit_code_line

pytestmark = [pytest.mark.skypilot, pytest.mark.slurm]

ROOT = Path(__file__).resolve().parents[2]
LIVE = ROOT / "scripts" / "skypilot-live"
SKY_ENV = ROOT / "scripts" / "skypilot-env"
ACCOUNT_FILES = (".bashrc", ".ssh", ".sky", ".sky_ssh_rc", ".sky_clusters", ".sky_provision")


def _run(*argv: str, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    done = subprocess.run(
        list(argv), env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{argv} -> rc {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _fingerprint_account(home: Path) -> dict[str, str]:
    """Content digests of the account files SkyPilot touches ("absent" when missing)."""
    found = {}
    for name in ACCOUNT_FILES:
        path = home / name
        if not path.exists():
            found[name] = "absent"
        elif path.is_file():
            found[name] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            listing = sorted(str(p.relative_to(path)) for p in path.rglob("*"))
            found[name] = hashlib.sha256("\n".join(listing).encode()).hexdigest()
    return found


@dataclass
class Live:
    state: Path
    env: dict[str, str]
    venv: Path
    timings: dict[str, float] = field(default_factory=dict)

    def timed(self, step: str, started: float) -> None:
        self.timings[step] = round(time.monotonic() - started, 1)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    venv = Path(os.environ.get("VIBESYS_SKY_VENV") or ROOT / ".sky-venv")
    started = time.monotonic()
    _run(str(SKY_ENV), "create", str(venv), timeout=900)
    env = {**os.environ, "VIBESYS_SKY_VENV": str(venv)}
    state = tmp_path_factory.mktemp("skylive") / "state"
    env["VIBESYS_SKY_LIVE_DIR"] = str(state)
    home = Path.home()
    before = _fingerprint_account(home)
    live = Live(state, env, venv)
    live.timed("skypilot venv", started)
    try:
        started = time.monotonic()
        _run(str(LIVE), "setup", env=env)
        live.timed("setup", started)
        started = time.monotonic()
        _run(str(LIVE), "api-start", env=env)
        live.timed("api server start", started)
        yield live
    finally:
        started = time.monotonic()
        teardown = subprocess.run(
            [str(LIVE), "teardown"], env=env, capture_output=True, text=True, timeout=600
        )
        live.timed("teardown", started)
        print("\nskypilot live timings (s):", live.timings)
        assert teardown.returncode == 0, f"leftovers after teardown:\n{teardown.stderr}"
        assert _fingerprint_account(home) == before, "the account's files were not restored"
        leftover = [
            line
            for line in _run("ps", "-eo", "pid,args").splitlines()
            if str(venv) in line or "/tmp/sky_ssh_" in line
        ]
        assert leftover == [], f"SkyPilot processes left: {leftover}"
        assert not state.exists()


def _backend(live: Live, tmp: Path, run_id: str) -> SkyPilotBackend:
    home = live.state / "home"
    clusters = tmp / "clusters.toml"
    clusters.write_text(
        "[profiles.local]\n"
        'runner = "skypilot"\n'
        'infra = "slurm/localslurm"\n'
        "cpus_per_node = 1\n"
        'allocation_time = "00:20:00"\n'
        f'remote_artifact_root = "{live.state}/remote/vibesys"\n'
    )
    request = SkyPilotRequest(profile="local", run_id=run_id)
    exported = dict(
        line.removeprefix("export ").split("=", 1)
        for line in (live.state / "env.sh").read_text().splitlines()
        if line.startswith("export ")
    )
    port = exported["VIBESYS_SKY_PORT"]

    def before_launch(cluster: str) -> None:
        _run(str(LIVE), "before-launch", cluster, env=live.env)

    return build_backend(
        request,
        state_dir=tmp / "state",
        clusters_config=clusters,
        sky_env={"HOME": str(home), "SKYPILOT_API_SERVER_LOCAL_PORT": port},
        venv=live.venv,
        before_launch=before_launch,
    )


def _submit(backend: SkyPilotBackend, tmp: Path, inv: str, attempt: int, cmd: list[str]) -> JobRef:
    name = f"vibesys-{inv}-{attempt}"
    req = SubmitRequest(inv, attempt, name, tuple(cmd), tmp / inv / str(attempt))
    receipt = backend.submit(req)
    return JobRef(name, receipt.job_id, req.run_dir, None, inv, attempt)


def _until(backend: SkyPilotBackend, job: JobRef, states: frozenset[RemoteState]) -> RemoteStatus:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        status = backend.status([job])[job.job_name]
        if status.state in states:
            return status
        time.sleep(2)
    raise AssertionError(f"{job.job_name} never reached {sorted(states)}: {status}")


def _slurm_jobs(name_part: str) -> list[str]:
    out = _run("squeue", "-h", "-o", "%i %j %T")
    return [line for line in out.splitlines() if name_part in line]


def test_a_campaign_on_real_skypilot(live: Live, tmp_path: Path) -> None:
    backend = _backend(live, tmp_path, "live-e2e")
    t = live.timings
    started = time.monotonic()
    assert backend.check_version() == "0.14.1"
    live.timed("version check", started)

    assert backend.inspect(refresh=False) is None  # the empty state: no cluster yet
    started = time.monotonic()
    plan = backend.plan_lease()
    assert plan.action is LeaseAction.LAUNCH
    first = backend.launch(plan)
    live.timed("launch (fresh allocation)", started)
    assert first.launched and len(first.allocation) == 1
    assert [line.split()[0] for line in _slurm_jobs(backend.cluster)] == list(first.allocation)

    # Two evaluations on one allocation: exit 0, then exit 3 with its true code.
    started = time.monotonic()
    ok = _submit(backend, tmp_path, "inv-ok", 1, ["sh", "-c", "echo hello; echo out > result.txt"])
    live.timed("exec submit", started)
    started = time.monotonic()
    done = _until(backend, ok, TERMINAL_REMOTE)
    live.timed("exec to terminal status", started)
    assert (done.state, done.exit_code) == (RemoteState.COMPLETED, 0), done
    sink = io.BytesIO()
    backend.read_log(ok, "stdout", 0, sink)
    assert sink.getvalue() == b"hello\n"
    found, _ = backend.list_artifacts(ok, ["*.txt"])
    assert [a.path for a in found] == ["result.txt"]

    bad = _submit(backend, tmp_path, "inv-bad", 1, ["sh", "-c", "echo bad >&2; exit 3"])
    failed = _until(backend, bad, TERMINAL_REMOTE)
    assert (failed.state, failed.exit_code) == (RemoteState.FAILED, 3), failed
    queue = backend.ops.queue(backend.cluster) or []
    assert {q.job_name: q.status.value for q in queue}[bad.job_name] == "FAILED"
    started = time.monotonic()
    assert "exit_code=3" in backend.collect(bad)
    live.timed("collect (with sky logs)", started)
    assert exit_code_line((bad.run_dir / "sky.log").read_text()) == 3
    assert backend.provenance(ok).allocation_job_id == first.allocation[0]
    assert backend.provenance(bad).allocation_job_id == first.allocation[0]
    _keep_golden(bad.run_dir / "sky.log", "wrapper_exit3_sky_log")

    # A running job is found again by name from a fresh adapter: no second exec.
    long = _submit(backend, tmp_path, "inv-long", 1, ["sleep", "600"])
    restarted = _backend(live, tmp_path, "live-e2e")
    nameless = JobRef(long.job_name, None, long.run_dir, None, "inv-long", 1)
    running = _until(restarted, nameless, frozenset({RemoteState.RUNNING}))
    assert running.job_id == long.job_id
    names = [q.job_name for q in restarted.ops.queue(restarted.cluster) or []]
    assert names.count(long.job_name) == 1

    # The allocation is lost under the running job; recovery on a new one.
    started = time.monotonic()
    _run("scancel", first.allocation[0])
    expired = _until(restarted, long, frozenset({RemoteState.ALLOCATION_EXPIRED}))
    live.timed("loss detected", started)
    assert expired.exit_code is None
    started = time.monotonic()
    plan = restarted.plan_lease()
    assert plan.action is LeaseAction.LAUNCH
    second = restarted.launch(plan)
    live.timed("relaunch (new allocation)", started)
    assert second.launched and second.allocation != first.allocation
    retry = _submit(restarted, tmp_path, "inv-long", 2, ["sh", "-c", "exit 0"])
    assert _until(restarted, retry, TERMINAL_REMOTE).state is RemoteState.COMPLETED
    assert restarted.provenance(retry).allocation_job_id == second.allocation[0]
    assert restarted.status([long])[long.job_name].state is RemoteState.ALLOCATION_EXPIRED

    # A fenced attempt: the exec that arrives after the fence runs nothing.
    fenced = JobRef("vibesys-inv-fenced-1", None, tmp_path / "fenced", None, "inv-fenced", 1)
    assert restarted.fence(fenced).is_fence
    late = _submit(restarted, tmp_path, "inv-fenced", 1, ["sh", "-c", "echo must-not-run"])
    refused = _until(restarted, late, TERMINAL_REMOTE)
    assert refused.state is RemoteState.LAUNCH_FAILED, refused
    assert restarted.dirs.state(late).refused is not None

    # Cancel one job; the cluster stays.
    victim = _submit(restarted, tmp_path, "inv-cancel", 1, ["sleep", "600"])
    _until(restarted, victim, frozenset({RemoteState.RUNNING}))
    started = time.monotonic()
    restarted.cancel(victim)
    cancelled = _until(restarted, victim, TERMINAL_REMOTE)
    live.timed("cancel to terminal status", started)
    assert (cancelled.state, cancelled.cancelled_by) == (RemoteState.CANCELLED, "vibesys")
    record = restarted.inspect(refresh=True)
    assert record is not None and record.status == "UP"
    assert restarted.allocation() == second.allocation[0]

    started = time.monotonic()
    restarted.release()
    live.timed("release (sky down)", started)
    assert restarted.inspect(refresh=True) is None
    assert _slurm_jobs(backend.cluster) == []
    assert t  # timings were recorded for the report


def _keep_golden(source: Path, name: str) -> None:
    """With VIBESYS_SKY_CAPTURE=1, keep a real output as a golden sample."""
    if os.environ.get("VIBESYS_SKY_CAPTURE") == "1" and source.exists():
        shutil.copy(source, ROOT / "tests" / "data" / "sky" / f"{name}.stdout")
