"""Fixtures for the tests against the real local Slurm cluster.

The cluster is the project's own (`scripts/local-slurm up`, idempotent and quick when it is
already up). These tests are never skipped: if the cluster cannot be brought up, they fail.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.slurm import (
    LOCAL_SLURM,
    UNFINISHED,
    slurm,
    wait_for_state,
    write_slurm_toml,
)
from vibesys.journal_schema import open_journal
from vibesys.states import JobState

_EXPORT = re.compile(r"^export ([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def _load_env_file(path: Path) -> dict[str, str]:
    """The `export NAME=VALUE` lines of the env.sh `scripts/local-slurm env` points to."""
    found = {}
    for line in path.read_text().splitlines():
        match = _EXPORT.match(line.strip())
        if match:
            words = shlex.split(match.group(2))
            found[match.group(1)] = words[0] if words else ""
    return found


@pytest.fixture(scope="session", autouse=True)
def slurm_cluster() -> Iterator[dict[str, str]]:
    """Bring the local cluster up (a no-op when it is) and export its SLURM_CONF."""
    up = subprocess.run(
        [str(LOCAL_SLURM), "up"], capture_output=True, text=True, timeout=600, check=False
    )
    if up.returncode != 0:
        pytest.fail(f"scripts/local-slurm up failed (rc={up.returncode}):\n{up.stderr}")
    env_file = subprocess.run(
        [str(LOCAL_SLURM), "env"], capture_output=True, text=True, timeout=60, check=True
    ).stdout.strip()
    exported = _load_env_file(Path(env_file))
    assert exported.get("SLURM_CONF"), f"{env_file} exports no SLURM_CONF"
    previous = {name: os.environ.get(name) for name in exported}
    os.environ.update(exported)
    yield exported
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
def slurm_toml(tmp_path: Path) -> Path:
    """slurm.toml for the local cluster; jobs keep their files under tmp_path/remote."""
    return write_slurm_toml(tmp_path / "slurm.toml", tmp_path / "remote")


@pytest.fixture(autouse=True)
def cancel_leftover_jobs(tmp_path: Path) -> Iterator[None]:
    """After each test, cancel the Slurm jobs of any invocation it left unfinished (a failed
    assertion must not leave `sleep 60` jobs holding the cluster's CPUs or GPUs)."""
    yield
    path = tmp_path / ".vibesys" / "journal.db"
    if not path.exists():
        return
    journal = open_journal(path, readonly=True)
    try:
        names = [
            attempt.job_name
            for inv in journal.invocations.list_invocations()
            if inv.state is not JobState.DONE
            for attempt in journal.invocations.attempts(inv.id)
        ]
    finally:
        journal.close()
    if not names:
        return
    out = slurm("squeue", "-h", "--states=all", "--name", ",".join(names), "-o", "%i|%T")
    for line in out.splitlines():
        job_id, state = line.strip().split("|")
        if state in UNFINISHED:
            slurm("scancel", job_id, check=False)


@pytest.fixture
def all_gpus_taken(tmp_path: Path) -> Iterator[str]:
    """A job of our own holding both fake GPUs, so that a GPU job stays PENDING. Its name is
    not a vibesys name (a lookup by name must never meet it)."""
    name = f"vbt-holder-{tmp_path.name[-12:]}-{os.getpid()}"
    holder = slurm(
        "sbatch",
        "--parsable",
        f"--job-name={name}",
        "--output=/dev/null",
        "--partition=priority",
        "--gres=gpu:2",
        "--time=5",
        "--wrap=sleep 120",
    ).strip()
    try:
        wait_for_state(name, ["RUNNING"])
        yield holder
    finally:
        slurm("scancel", holder)
