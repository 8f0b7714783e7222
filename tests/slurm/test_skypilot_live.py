"""A campaign end to end through `vibesys` (the CLI, the engine, the journal) against the real
pinned SkyPilot (0.14.1) on the project's local Slurm cluster over SSH (127.0.0.1:2222).

The module sets up exactly what SkyPilot needs (scripts/skypilot-live setup: a throwaway client
HOME, uv, python3.10, SSL_CERT_FILE; every changed file of the account backed up), starts its
own API server, and afterwards undoes it all (teardown) and checks that no SkyPilot process and
no Slurm job of its clusters is left and that the account's files are as they were.

One campaign, driven as an agent drives it: `vibesys session serve --profile` on the trusted
side, `vibesys-eval` in the agent's place. The first evaluation launches the campaign's cluster
(exit 0, an artifact brought home, a candidate holding .env, id_rsa, .git/, __pycache__/ and
200 MB of weights of which only the snapshot reaches the cluster); the agent edits the
candidate, uncommitted, and the second runs the edit on the same allocation (exit 3, the true
code recorded); the allocation is killed (scancel of its holding job) and the third runs on a
new one; teardown keeps the cluster. Then, on the same journal, `vibesys run` crashed right
after its exec and reconciled (found by name, no second exec), a cancel (the cluster stays),
and the release; nothing is left. Budget (measured, 2 CPUs): 10 to 15 minutes with the
SkyPilot venv installed (scripts/test installs it first), the longer on a busy node.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.bridge.session_helpers import Session, result_line, start_session
from tests.helpers.cli import vibesys_cli
from vibesys.adapters.skypilot import SkyEnvironment
from vibesys.adapters.skypilot.boundary import SkyCli
from vibesys.adapters.skypilot.ops import SkyOps
from vibesys.adapters.skypilot.parse import exit_code_line, parse_status

pytestmark = [pytest.mark.skypilot, pytest.mark.slurm, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
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


@dataclass
class Live:
    state: Path
    #: the environment of every vibesys process of the campaign
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
        leftover = [
            line
            for line in _run("ps", "-eo", "pid,args").splitlines()
            if str(venv) in line or "/tmp/sky_ssh_" in line
        ]
        assert leftover == [], f"SkyPilot processes left: {leftover}"
        assert not state.exists()


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

    def evaluate(self, session: Session, *args: str) -> tuple[int, str, str, dict[str, Any]]:
        """One `vibesys-eval` of the session, as the agent's helper runs it: its status, its
        stdout (the job's, then the result's line), its stderr, and the JobResult."""
        helper = session.helper(*args)
        out, err = helper.communicate(timeout=900)
        result = result_line(out)
        return helper.returncode, out.rsplit("\n", 2)[0], err, result

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

    # The trusted host side starts the campaign's session; the agent's helper only names what
    # to run. The candidate (the session's workspace) holds secrets, VCS metadata, a cache and
    # 200 MB of weights: only the snapshot reaches the cluster, verified where the job runs.
    candidate = _candidate(tmp_path / "ws")
    started = time.monotonic()
    session = start_session(
        tmp_path,
        "--profile",
        "local",
        "--clusters-config",
        str(c.config),
        "--default-timeout",
        "900",
        env=live.env,
    )
    live.timed("session start (site check)", started)
    try:
        # 1. The first evaluation launches the campaign's cluster: exit 0, with an artifact.
        started = time.monotonic()
        rc, out, err, first = c.evaluate(
            session, "--artifact", "result.txt", "--", "sh", "-c",
            "echo hello; find . -type f | sort; cat .vibesys-snapshot; echo out > result.txt",
        )  # fmt: skip
        live.timed("first evaluation (launch + exec)", started)
        assert (rc, first["status"]) == (0, "COMPLETED"), err
        assert "hello\n" in out and "./src/main.py\n" in out
        for secret in SECRETS:
            assert f"/{secret}" not in out  # the job's copy holds none of them
        assert _leaked(live.state / "remote") == []
        [lease] = c.leases()
        assert (lease["state"], lease["profile"], lease["campaign"]) == ("up", "local", CAMPAIGN)
        allocation = lease["allocation_job"]
        assert _slurm_jobs(lease["name"]) == [allocation]
        ran = first["provenance"]
        assert (first["cluster_name"], ran["allocation_job_id"]) == (lease["name"], allocation)
        assert first["remote_job_id"] == f"{ran['sky_job_id']}@{allocation}"
        assert [(a["path"], a["size"]) for a in first["artifacts"]] == [("result.txt", 4)]
        copy = Path(first["results_dir"])
        assert (copy / "artifacts" / "result.txt").read_text() == "out\n"
        assert not (candidate / "result.txt").exists()  # nothing synced back

        # 2. The agent edits the candidate (nothing committed) and evaluates again: the same
        # allocation, the edited snapshot, exit 3 with the true code.
        (candidate / "src" / "main.py").write_text("print('edited')\n")
        started = time.monotonic()
        rc, out, err, second = c.evaluate(
            session, "--", "sh", "-c", "cat src/main.py; echo bad >&2; exit 3"
        )
        live.timed("second evaluation (edited, reuse + exec)", started)
        assert (rc, second["status"], second["exit_code"]) == (3, "APPLICATION_FAILED", 3), err
        assert "print('edited')" in out and "bad\n" in err
        assert second["provenance"]["allocation_job_id"] == allocation
        assert [x["id"] for x in c.leases()] == [lease["id"]]  # no second launch
        shown = c.show(second["invocation_id"])
        sky_log = Path(shown["invocation_dir"]) / "1" / "sky.log"
        assert exit_code_line(sky_log.read_text()) == 3  # SkyPilot itself only says FAILED
        _keep_golden(sky_log, "wrapper_exit3_sky_log")

        # 3. The allocation is killed between evaluations; the next one runs on a new one.
        _run("scancel", allocation)
        deadline = time.monotonic() + 120
        while _slurm_jobs(lease["name"]):
            assert time.monotonic() < deadline, "the allocation did not end"
            time.sleep(2)
        started = time.monotonic()
        rc, out, err, third = c.evaluate(session, "--", "sh", "-c", "echo third")
        live.timed("third evaluation (relaunch + exec)", started)
        assert (rc, third["status"], out.splitlines()[0]) == (0, "COMPLETED", "third"), err
        old, new = c.leases()
        assert (old["id"], old["state"]) == (lease["id"], "lost")
        assert new["state"] == "up" and new["allocation_job"] != allocation
        assert third["provenance"]["allocation_job_id"] == new["allocation_job"]
    finally:
        status, err = session.stop()
    assert status == 0, err  # teardown keeps the campaign's cluster
    assert [x["state"] for x in c.leases()] == ["lost", "up"]

    # 4. Beside the bridge, on the same journal: `vibesys run` dies right after its exec,
    # before it records the job id; reconcile finds it by name (no second exec).
    started = time.monotonic()
    crashed = c.run("--", "sh", "-c", "sleep 15; echo slept",
                    env={"VIBESYS_FAILPOINTS": "after_submit_effect"})  # fmt: skip
    assert crashed.returncode == 137, crashed.stderr
    [row] = [i for i in json.loads(c.vibesys("journal", "list", "--json").stdout)["invocations"]
             if i["state"] != "DONE"]  # fmt: skip
    assert row["state"] == "SUBMITTING"
    reconciled = c.vibesys("reconcile", "--json")
    rows = json.loads(reconciled.stdout)["reconciled"]
    assert [r["after"] for r in rows] in (["RUNNING"], ["DONE"])
    waited = c.vibesys("wait", row["id"])
    live.timed("crash, reconcile, wait", started)
    assert waited.returncode == 0, waited.stderr
    name = c.show(row["id"])["attempts"][0]["job_name"]
    assert [j["job_name"] for j in c.sky_jobs(new["name"])].count(name) == 1  # one exec

    # 5. Cancel an evaluation: it stops, the cluster stays.
    started = time.monotonic()
    victim = c.run("--detach", "--", "sleep", "600").stdout.split()[0]
    cancelled = c.vibesys("cancel", victim)
    live.timed("cancel", started)
    assert cancelled.returncode == 0, cancelled.stderr
    assert (c.show(victim)["state"], c.show(victim)["outcome"]) == ("DONE", "CANCELLED")
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
    state = tmp_path / "state"
    assert not [p for p in state.rglob("*") if p.is_socket() or p.name.endswith("-token")]


#: Names of candidate files that must never reach the cluster.
SECRETS = (".env", "id_rsa", ".git", "__pycache__", "model.safetensors")


def _candidate(candidate: Path) -> Path:
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


def _submitted(shown: dict[str, Any]) -> str:
    [row] = [r for r in shown["history"] if r["event"] == "Submitted"]
    return str(row["evidence"]["observation"])


def _keep_golden(source: Path, name: str) -> None:
    """With VIBESYS_SKY_CAPTURE=1, keep a real output as a golden sample."""
    if os.environ.get("VIBESYS_SKY_CAPTURE") == "1" and source.exists():
        shutil.copy(source, ROOT / "tests" / "data" / "sky" / f"{name}.stdout")
