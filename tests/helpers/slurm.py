"""Helpers for the tests against the project's real local Slurm cluster (scripts/local-slurm).

Everything here talks to the real cluster through its ordinary clients (`squeue`, `sacct`,
`scancel`, `scontrol`) and to vibesys through its real command line.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tests.helpers.cli import vibesys_cli
from tests.helpers.hang_guard import wait_until
from tests.helpers.paths import ROOT

LOCAL_SLURM = ROOT / "scripts" / "local-slurm"

#: What `remote_workspace_root` may hold (it is written into #SBATCH lines).
SAFE_PATH = re.compile(r"^/[A-Za-z0-9._/+@:,=-]*$")

#: Job states in which a job is not finished yet (sacct/squeue words).
UNFINISHED = frozenset(
    {"PENDING", "RUNNING", "REQUEUED", "REQUEUE_HOLD", "CONFIGURING", "COMPLETING", "SUSPENDED"}
)

#: sacct shows a finished job's real record up to ~5 s after it ends; allow for a busy cluster.
SACCT_LAG_SECONDS = 15.0


# -- configuration ---------------------------------------------------------------------------


def write_slurm_toml(
    path: Path,
    remote_root: Path,
    *,
    partitions: Sequence[str] = ("main", "priority"),
    max_gpus: int = 2,
    max_time_minutes: int = 120,
    default_time_minutes: int = 5,
    windows_command: Sequence[str] | None = None,
) -> Path:
    """A slurm.toml for the local cluster, with fast polling and an agent_gpu table."""
    root = str(remote_root)
    assert SAFE_PATH.match(root), f"remote_workspace_root {root!r} is not a safe path"

    def toml_list(items: Iterable[str]) -> str:
        return "[" + ", ".join(json.dumps(item) for item in items) + "]"

    lines = [
        "[slurm]",
        'name = "local"',
        f"remote_workspace_root = {json.dumps(root)}",
        "poll_initial_seconds = 0.2",
        "poll_max_seconds = 2",
        "",
        "[slurm.transport]",
        'kind = "local"',
        "",
        "[vibesys.agent_gpu]",
        f"partitions = {toml_list(partitions)}",
        f"max_gpus = {max_gpus}",
        f"max_time_minutes = {max_time_minutes}",
        f"default_time_minutes = {default_time_minutes}",
    ]
    if windows_command is not None:
        lines.append(f"windows_command = {toml_list(windows_command)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def fast_toml(tmp_path: Path, *extra: str) -> Path:
    """slurm.toml with a short command timeout (a frozen controller answers nothing)."""
    path = write_slurm_toml(tmp_path / "slurm.toml", tmp_path / "remote")
    text = path.read_text().replace("[slurm]\n", "[slurm]\ncommand_timeout_seconds = 4\n", 1)
    path.write_text(text + "".join(f"{line}\n" for line in extra))
    return path


def daemon_pid(cluster: dict[str, str], name: str) -> int:
    for line in (Path(cluster["VIBESYS_SLURM_DIR"]) / "pids").read_text().splitlines():
        daemon, pid, _start = line.split()
        if daemon == name:
            return int(pid)
    raise AssertionError(f"scripts/local-slurm recorded no {name}")


@contextlib.contextmanager
def frozen(pid: int) -> Iterator[None]:
    """The daemon stopped (SIGSTOP) for the block's duration, and always continued after."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


# -- vibesys ---------------------------------------------------------------------------------


def cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """The real `vibesys` command (see tests/helpers/cli.py)."""
    return vibesys_cli(*args, cwd=cwd, env=env, timeout=timeout)


def run_args(adapter: str, config: Path, *options: str) -> list[str]:
    """`vibesys run` arguments up to (and including) the `--` before the command."""
    return ["run", "--adapter", adapter, "--slurm-config", str(config), *options, "--"]


def show(cwd: Path, invocation: str) -> dict[str, Any]:
    """`vibesys journal show --json`."""
    shown = cli("journal", "show", invocation, "--json", cwd=cwd)
    assert shown.returncode == 0, shown.stderr
    result: dict[str, Any] = json.loads(shown.stdout)
    return result


def listed(cwd: Path) -> list[dict[str, Any]]:
    """`vibesys journal list --json` ([] while no journal exists)."""
    if not (cwd / ".vibesys" / "journal.db").exists():
        return []
    out = cli("journal", "list", "--json", cwd=cwd)
    if out.returncode != 0 and "is an empty database" in out.stderr:
        return []  # `vibesys run` created the file and has not committed its schema yet
    assert out.returncode == 0, out.stderr
    result: list[dict[str, Any]] = json.loads(out.stdout)["invocations"]
    return result


def only_invocation(cwd: Path) -> dict[str, Any]:
    found = listed(cwd)
    assert len(found) == 1, f"expected one invocation, found {len(found)}"
    return show(cwd, str(found[0]["id"]))


def wait_for_job_id(cwd: Path, timeout: float = 60) -> tuple[str, str, str]:
    """(invocation id, job name, job id) once the running `vibesys run` in `cwd` recorded it."""

    def recorded() -> tuple[str, str, str] | None:
        for inv in listed(cwd):
            attempts = inv.get("attempts") or []
            if attempts and attempts[-1].get("job_id"):
                last = attempts[-1]
                return str(inv["id"]), str(last["job_name"]), str(last["job_id"])
        return None

    found = wait_until(recorded, timeout, f"a job id recorded in {cwd}", interval=0.2)
    assert found is not None
    return found


def history_text(inv: dict[str, Any]) -> str:
    """Every history row as one line of text, for assertions on the evidence."""
    return "\n".join(
        f"{row['from']} -> {row['to']} {row['event']} {json.dumps(row['evidence'])}"
        for row in inv["history"]
    )


def finished_evidence(inv: dict[str, Any]) -> str:
    """The evidence of the transition that recorded the job's end."""
    rows = [r for r in inv["history"] if r["event"] in ("Finished", "InfraFailed", "Rejected")]
    assert rows, history_text(inv)
    return json.dumps(rows[-1]["evidence"])


def job_output(inv: dict[str, Any], attempt: int | None = None) -> str:
    """The stdout vibesys collected into the local attempt directory."""
    number = attempt if attempt is not None else int(inv["attempts"][-1]["attempt"])
    return (Path(inv["invocation_dir"]) / str(number) / "stdout").read_text()


# -- Slurm -----------------------------------------------------------------------------------


def slurm(*argv: str, check: bool = True, timeout: float = 30) -> str:
    """Run one Slurm client command; its stdout."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"{shlex.join(argv)} -> rc={done.returncode}: {done.stderr.strip()}")
    return done.stdout


def squeue_jobs(name: str) -> dict[str, str]:
    """Job id → state of every job squeue knows (all states, until MinJobAge) with `name`."""
    out = slurm("squeue", "-h", "--states=all", "--name", name, "-o", "%i|%j|%T")
    jobs = {}
    for line in out.splitlines():
        job_id, job_name, state = line.strip().split("|")
        if job_name == name:
            jobs[job_id] = state
    return jobs


def sacct_rows(name: str) -> list[tuple[str, str, str]]:
    """(JobID, JobName, State) of every job named `name` in the last hour, per sacct."""
    out = slurm(
        "sacct", "-X", "-n", "-P", "-o", "JobID,JobName,State", "--name", name, "-S", "now-3600"
    )
    rows = []
    for line in out.splitlines():
        if line.strip():
            job_id, job_name, state = line.strip().split("|", 2)
            rows.append((job_id, job_name, state))
    return rows


def settled_sacct(name: str, timeout: float = SACCT_LAG_SECONDS) -> list[tuple[str, str, str]]:
    """sacct's rows for `name` once sacct has caught up: at least one row with the real name,
    every job squeue knows under that name present, and none of them unfinished. sacct lags a
    job's end by up to ~5 s (showing the name `allocation` until then), so this polls."""
    deadline = time.monotonic() + timeout
    rows: list[tuple[str, str, str]] = []
    while True:
        live = squeue_jobs(name)
        rows = [row for row in sacct_rows(name) if row[1] == name]
        ids = {row[0] for row in rows}
        done = all(row[2].split()[0] not in UNFINISHED for row in rows)
        if rows and done and set(live) <= ids:
            return rows
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"sacct did not settle for {name} within {timeout} s: sacct {rows}, squeue {live}"
            )
        time.sleep(0.5)


def sacct_states(name: str) -> list[str]:
    """The state word of each job named `name` (`CANCELLED` for `CANCELLED by 0`)."""
    return [row[2].split()[0] for row in settled_sacct(name)]


def wait_for_state(name: str, wanted: Iterable[str], timeout: float = 60) -> str:
    """Wait until squeue shows the job named `name` in one of `wanted`; its job id."""
    states = set(wanted)
    deadline = time.monotonic() + timeout
    seen: dict[str, str] = {}
    while time.monotonic() < deadline:
        seen = squeue_jobs(name)
        for job_id, state in seen.items():
            if state in states:
                return job_id
        time.sleep(0.1)
    raise AssertionError(f"{name} never reached {sorted(states)} within {timeout} s: {seen}")


def leaves_the_queue(name: str, timeout: float = 15) -> float:
    """Seconds until squeue (its default states: pending and running) no longer shows a job
    named `name`: nothing of it waits in Slurm's queue any more."""
    start = time.monotonic()
    while slurm("squeue", "-h", "--name", name, "-o", "%i|%T|%r").strip():
        assert time.monotonic() - start < timeout, slurm("squeue", "-h", "--name", name)
        time.sleep(0.1)
    return time.monotonic() - start
