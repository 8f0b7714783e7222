"""A campaign end to end through `vibesys` (the CLI, the engine, the journal) against the real
pinned SkyPilot (0.14.1) on the project's local Slurm cluster over SSH (127.0.0.1:2222).

The module sets up exactly what SkyPilot needs (scripts/skypilot-live setup: a throwaway client
HOME, uv, python3.10, SSL_CERT_FILE; every changed file of the account backed up), starts its
own API server, and afterwards undoes it all (teardown) and checks that no SkyPilot process and
no Slurm job of its clusters is left and that the account's files are as they were.

One campaign, driven as an agent drives it: the model-serving example
(examples/model_serving/run.py --profile), whose `vibesys.Session` is the trusted side and whose
rounds evaluate through `vibesys-eval` in the agent's place. Its first round launches the
campaign's cluster (exit 0, results/metrics.json brought home: throughput, p50/p99; a
candidate that also holds .env, id_rsa, .git/, __pycache__/ and 200 MB of weights, of which
only the snapshot reaches the cluster); the second runs edited settings, uncommitted, on the
same allocation (answers off: exit 3, the true code recorded); the example kills the
allocation (scancel of its holding job) and the third round runs on a new one; the session's
teardown keeps the cluster (--keep-cluster: the test releases it). Then, on the same journal,
`vibesys run` crashed right after its exec and reconciled (found by name, no second exec), then
cancelled (the cluster stays), and the release; nothing is left. Budget (measured, 2 CPUs): 10 to
15 minutes with the SkyPilot venv installed (scripts/test installs it first), the longer on a
busy node.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.helpers.cli import vibesys_cli
from vibesys.adapters.skypilot import SkyEnvironment
from vibesys.adapters.skypilot.boundary import SkyCli
from vibesys.adapters.skypilot.ops import SkyOps
from vibesys.adapters.skypilot.parse import exit_code_line, parse_status

pytestmark = [pytest.mark.skypilot, pytest.mark.slurm, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "model_serving" / "run.py"
LIVE = ROOT / "scripts" / "skypilot-live"
SKY_ENV = ROOT / "scripts" / "skypilot-env"
ACCOUNT_FILES = (".bashrc", ".ssh", ".sky", ".sky_ssh_rc", ".sky_clusters", ".sky_provision")
#: the session's run id (tests/bridge/session_helpers.py), which `vibesys run` names too
CAMPAIGN = "campaign-1"


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


class Live(msgspec.Struct):
    state: Path
    #: the environment of every vibesys process of the campaign
    env: dict[str, str]
    venv: Path
    timings: dict[str, float] = msgspec.field(default_factory=dict)

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
        exported = dict(
            line.removeprefix("export ").split("=", 1)
            for line in (state / "env.sh").read_text().splitlines()
            if line.startswith("export ")
        )
        env.update(exported)
        # The site's hook before every launch: uv placed in the cluster home, a stale runtime
        # directory dropped (scripts/skypilot-live explains why this machine needs it).
        env["VIBESYS_SKY_BEFORE_LAUNCH"] = f"{LIVE} before-launch"
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
        mine = _ancestors()  # whoever started the tests may name the venv on its command line
        leftover = [
            line
            for line in _run("ps", "-eo", "pid,args").splitlines()[1:]
            if (str(venv) in line or "/tmp/sky_ssh_" in line) and int(line.split()[0]) not in mine
        ]
        assert leftover == [], f"SkyPilot processes left: {leftover}"
        assert not state.exists()


def _ancestors() -> set[int]:
    """This process and every process above it."""
    found, pid = set(), os.getpid()
    while pid > 1 and pid not in found:
        found.add(pid)
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        pid = int(fields[1])
    return found


class Campaign:
    """`vibesys` commands of one campaign, in one working directory (its journal)."""

    def __init__(self, live: Live, cwd: Path) -> None:
        self.live = live
        self.cwd = cwd
        self.config = cwd / "clusters.toml"
        self.config.write_text(
            "[profiles.local]\n"
            'runner = "skypilot"\n'
            'infra = "slurm/localslurm"\n'
            "cpus_per_node = 1\n"
            'allocation_time = "00:20:00"\n'
            f'remote_artifact_root = "{live.state}/remote/vibesys"\n'
        )

    def vibesys(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 900
    ) -> subprocess.CompletedProcess[str]:
        return vibesys_cli(*args, cwd=self.cwd, env={**self.live.env, **(env or {})},
                           timeout=timeout)  # fmt: skip

    def run(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        base = ["run", "--adapter", "skypilot", "--profile", "local", "--run-id", CAMPAIGN]
        base += ["--clusters-config", str(self.config), "--retry-delay", "0"]
        return self.vibesys(*base, *args, env=env)

    def show(self, invocation: str) -> dict[str, Any]:
        shown = self.vibesys("journal", "show", invocation, "--json")
        assert shown.returncode == 0, shown.stderr
        found: dict[str, Any] = json.loads(shown.stdout)
        return found

    def leases(self) -> list[dict[str, Any]]:
        listed = self.vibesys("clusters", "--json")
        assert listed.returncode == 0, listed.stderr
        found: list[dict[str, Any]] = json.loads(listed.stdout)["clusters"]
        return found

    def claimed(self, invocation: str, attempt: int) -> bool:
        return (
            self.live.state / "remote" / "vibesys" / invocation / str(attempt) / "claim"
        ).exists()

    def sky_jobs(self, cluster: str) -> list[dict[str, Any]]:
        out = _run(str(LIVE), "sky", "queue", cluster, "-o", "json", env=self.live.env)
        jobs: list[dict[str, Any]] = json.loads(out[out.index("{") :]).get(cluster, [])
        return jobs


def _slurm_jobs(name_part: str) -> list[str]:
    out = _run("squeue", "-h", "-o", "%i %j %T")
    return [line.split()[0] for line in out.splitlines() if name_part in line]


def test_status_of_an_empty_state(live: Live) -> None:
    """Contract: the real `sky status -o json` of a fresh API server, as the adapter reads it
    (first in the module: no cluster exists yet)."""
    out = _run(str(LIVE), "sky", "status", "-o", "json", env=live.env)
    assert parse_status(out) == []
    environment = SkyEnvironment.from_environ(live.env)
    ops = SkyOps(SkyCli(venv=environment.venv, env=environment.sky_env(), verify_version=True))
    assert ops.status(f"vibesys-{CAMPAIGN}-nosuch", refresh=True) is None
    assert ops.queue(f"vibesys-{CAMPAIGN}-nosuch") is None


def test_a_campaign_through_the_bridge_on_real_skypilot(live: Live, tmp_path: Path) -> None:
    c = Campaign(live, tmp_path)

    # The example's candidate (a model server, its settings, the benchmark) goes into a
    # workspace that also holds secrets, VCS metadata, a cache and 200 MB of weights: only the
    # snapshot reaches the cluster, verified where the job runs (the benchmark lists its copy).
    candidate = _candidate(tmp_path / "serving" / "candidate")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--profile", "local", "--clusters-config", str(c.config),
         "--run-id", CAMPAIGN, "--seconds", "2", "--keep-cluster"],
        cwd=tmp_path, env=live.env | {"PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=1500, check=False,
    )  # fmt: skip
    live.timed("the example's three rounds (session, launch, reuse, expiry, relaunch)", started)
    out = done.stdout
    assert done.returncode == 0, f"{out}\n{done.stderr}"
    assert "Traceback" not in done.stderr
    for took in re.findall(r"^round (\d): \w+ \(\w+, exit \d+\) in ([0-9.]+) s$", out, re.M):
        live.timings[f"round {took[0]}"] = float(took[1])
    rounds = json.loads((tmp_path / "serving" / "rounds.json").read_text())
    first, second, third = (r["result"] for r in rounds)
    old, new = c.leases()
    assert (old["state"], old["profile"], old["campaign"]) == ("lost", "local", CAMPAIGN)
    allocation = old["allocation_job"]

    # 1. The first round launched the campaign's cluster: exit 0, the metrics brought home.
    assert (rounds[0]["exit"], first["status"]) == (0, "COMPLETED"), out
    files = rounds[0]["metrics"]["files"]
    assert "server.py" in files and "src/main.py" in files
    assert not [f for f in files if set(Path(f).parts) & set(SECRETS)]  # the job's copy
    assert _leaked(live.state / "remote") == []
    ran = first["provenance"]
    assert (first["cluster_name"], ran["allocation_job_id"]) == (old["name"], allocation)
    assert first["remote_job_id"] == f"{ran['sky_job_id']}@{allocation}"
    copy = Path(first["results_dir"]) / "artifacts" / "results" / "metrics.json"
    assert [(a["path"], a["size"]) for a in first["artifacts"]] == [
        ("results/metrics.json", copy.stat().st_size)
    ]
    metrics = json.loads(copy.read_text())
    assert metrics["requests"] > 0 and metrics["p50_ms"] <= metrics["p99_ms"]
    assert metrics["throughput_rps"] > 0 and metrics["max_error"] <= metrics["tolerance"]
    assert not (candidate / "results").exists()  # nothing synced back

    # 2. The edited settings (nothing committed) on the same allocation: answers off, exit 3
    # with the true code.
    assert (rounds[1]["exit"], second["status"], second["exit_code"]) == (
        3, "APPLICATION_FAILED", 3
    ), out  # fmt: skip
    assert 'round 2 | settings: {"keep_alive": true, "precision": "q4"' in out
    assert "round 2 ! rejected: answers off by up to" in out
    assert second["provenance"]["allocation_job_id"] == allocation
    shown = c.show(second["invocation_id"])
    sky_log = Path(shown["invocation_dir"]) / "1" / "sky.log"
    assert exit_code_line(sky_log.read_text()) == 3  # SkyPilot itself only says FAILED
    _keep_golden(sky_log, "wrapper_exit3_sky_log")

    # 3. The allocation was killed before the third round, which ran on a new one; one lease
    # per allocation (no launch for the second round), the session's teardown kept the new.
    assert f"expiry: allocation {allocation} of {old['name']} ended (scancel)" in out
    assert (rounds[2]["exit"], third["status"]) == (0, "COMPLETED"), out
    assert 'round 3 | settings: {"keep_alive": true, "precision": "q8"' in out
    assert new["state"] == "up" and new["allocation_job"] != allocation
    assert third["provenance"]["allocation_job_id"] == new["allocation_job"]
    assert _slurm_jobs(new["name"]) == [new["allocation_job"]]
    assert "session closed: exit status 0" in out
    assert "every round as expected: True" in out

    # 4. Beside the bridge, on the same journal: `vibesys run` dies right after its exec,
    # before it records the job id; reconcile finds it by name (no second exec); a cancel
    # stops it, and the cluster stays.
    started = time.monotonic()
    crashed = c.run("--", "sleep", "600", env={"VIBESYS_FAILPOINTS": "after_submit_effect"})
    assert crashed.returncode == 137, crashed.stderr
    [row] = [i for i in json.loads(c.vibesys("journal", "list", "--json").stdout)["invocations"]
             if i["state"] != "DONE"]  # fmt: skip
    assert row["state"] == "SUBMITTING"
    reconciled = c.vibesys("reconcile", "--json")
    assert [r["after"] for r in json.loads(reconciled.stdout)["reconciled"]] == ["RUNNING"]
    live.timed("crash, reconcile", started)
    started = time.monotonic()
    cancelled = c.vibesys("cancel", row["id"])
    live.timed("cancel", started)
    assert cancelled.returncode == 0, cancelled.stderr
    shown = c.show(row["id"])
    assert (shown["state"], shown["outcome"]) == ("DONE", "CANCELLED")
    name = shown["attempts"][0]["job_name"]
    assert [j["job_name"] for j in c.sky_jobs(new["name"])].count(name) == 1  # one exec
    assert [x["state"] for x in c.leases()] == ["lost", "up"]
    assert _slurm_jobs(new["name"]) == [new["allocation_job"]]

    # 6. The campaign ends: release, recorded; nothing of it is left in Slurm or here.
    started = time.monotonic()
    released = c.vibesys("clusters", "release", new["name"])
    live.timed("release", started)
    assert released.returncode == 0, released.stderr
    assert [x["state"] for x in c.leases()] == ["lost", "released"]
    assert _slurm_jobs(new["name"]) == []
    settled = c.vibesys("reconcile")
    assert (settled.returncode, settled.stdout) == (0, "nothing to reconcile\n")
    assert c.vibesys("journal", "verify").returncode == 0
    state = tmp_path / "serving" / "session"
    assert not [p for p in state.rglob("*") if p.is_socket() or p.name.endswith("-token")]


#: Names of candidate files that must never reach the cluster.
SECRETS = (".env", "id_rsa", ".git", "__pycache__", "model.safetensors")


def _candidate(candidate: Path) -> Path:
    """A workspace holding what must never reach the cluster, beside a source file that must."""
    (candidate / "src" / "__pycache__").mkdir(parents=True)
    (candidate / "src" / "main.py").write_text("print('candidate')\n")
    (candidate / "src" / "__pycache__" / "main.cpython-311.pyc").write_bytes(b"\0" * 16)
    (candidate / ".env").write_text("API_TOKEN=secret\n")
    (candidate / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (candidate / ".git").mkdir()
    (candidate / ".git" / "config").write_text("[core]\n")
    with open(candidate / "model.safetensors", "wb") as weights:  # 200 MB, sparse
        weights.truncate(200 * 1024 * 1024)
    return candidate


def _leaked(remote: Path) -> list[str]:
    """What of the candidate's secrets is on the cluster: under vibesys's own root (snapshots,
    remote attempt directories) and in any SkyPilot workdir of the cluster homes."""
    places = [remote / "vibesys", *remote.glob(".sky_clusters/*/sky_workdir")]
    return sorted(
        str(path) for place in places for path in place.rglob("*") if path.name in SECRETS
    )


def _keep_golden(source: Path, name: str) -> None:
    """With VIBESYS_SKY_CAPTURE=1, keep a real output as a golden sample."""
    if os.environ.get("VIBESYS_SKY_CAPTURE") == "1" and source.exists():
        shutil.copy(source, ROOT / "tests" / "data" / "sky" / f"{name}.stdout")
