"""The status round in sacct's lag window, with scripted Slurm answers in the exact 22.05
formats the scheduler asks for (tests/data holds the observed outputs).

Right after a job is killed (scancel, NODE_FAIL, TIMEOUT) squeue already shows the end but sacct
still reads `ID|allocation|...`: a placeholder that proves nothing. squeue's end must stand
then; reading the placeholder as "unknown" turned every external scancel and node failure
observed within ~5 s into UNRESOLVED (exit 4) on the real cluster.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.scripted_slurm import ScriptedSlurm
from vibesys.adapters.base import JobRef, RemoteState, RemoteStatus
from vibesys.adapters.slurm.backend import SlurmBackend
from vibesys.config.load import parse_slurm_config

pytestmark = pytest.mark.slurm

NAME = "vibesys-0123456789ab-1"
CONFIG = """
[slurm]
name = "scripted"
remote_workspace_root = "/nonexistent/vibesys-remote"
[slurm.transport]
kind = "local"
"""


#: The provenance fields of SQUEUE_FORMAT (%N|%S|%e|%C) and SACCT_FORMAT (the last three).
SQUEUE_WHERE = "|node1|2026-11-30T03:00:46|2026-11-30T03:00:47|1"
SACCT_WHERE = "|priority|node1|billing=1,cpu=1,node=1"


def status_of(tmp_path: Path, squeue: str, sacct: str) -> tuple[RemoteState, str, list[str]]:
    status, calls = remote_status(tmp_path, squeue, sacct)
    return status.state, status.observation, calls


def remote_status(tmp_path: Path, squeue: str, sacct: str) -> tuple[RemoteStatus, list[str]]:
    runner = ScriptedSlurm(squeue, sacct)
    scheduler = SlurmBackend(parse_slurm_config(CONFIG), runner)
    job = JobRef(NAME, "581", tmp_path / "1", None, "0123456789ab", 1)
    return scheduler.status([job])[NAME], [call[0] for call in runner.calls]


@pytest.mark.parametrize(
    ("squeue_state", "reason", "expected"),
    [
        ("CANCELLED", "None", RemoteState.CANCELLED),
        ("NODE_FAIL", "NodeDown", RemoteState.NODE_FAIL),
        ("TIMEOUT", "TimeLimit", RemoteState.TIMEOUT),
    ],
)
def test_squeue_end_stands_while_sacct_lags(
    tmp_path: Path, squeue_state: str, reason: str, expected: RemoteState
) -> None:
    squeue = f"581|{NAME}|{squeue_state}|{reason}|priority|N/A{SQUEUE_WHERE}\n"
    sacct = f"581|allocation|{squeue_state}|0:0|2026-11-30T03:00:46|2026-11-30T03:00:47|None"
    sacct += f"{SACCT_WHERE}\n"
    state, observation, calls = status_of(tmp_path, squeue, sacct)
    assert state is expected, observation
    assert observation.startswith("squeue: "), observation
    assert calls.count("squeue") == 1 and calls.count("sacct") == 1


def test_sacct_speaks_once_it_has_caught_up(tmp_path: Path) -> None:
    squeue = f"581|{NAME}|CANCELLED|None|priority|N/A{SQUEUE_WHERE}\n"
    sacct = f"581|{NAME}|CANCELLED by 0|0:0|2026-11-30T03:00:46|2026-11-30T03:00:47|None"
    status, _ = remote_status(tmp_path, squeue, sacct + f"{SACCT_WHERE}\n")
    assert status.state is RemoteState.CANCELLED
    assert status.observation.startswith("sacct: ") and "CANCELLED by 0" in status.observation
    # Where it ran, as sacct says (the row the status was read from), with the site's name.
    assert dict(status.provenance) == {
        "site": "scripted",
        "slurm_job_id": "581",
        "partition": "priority",
        "nodes": "node1",
        "tres": "billing=1,cpu=1,node=1",
        "start": "2026-11-30T03:00:46",
        "end": "2026-11-30T03:00:47",
    }


def test_placeholder_alone_proves_nothing(tmp_path: Path) -> None:
    """squeue has forgotten the job and sacct has no real record yet: still unknown."""
    sacct = "581|allocation|CANCELLED|0:0|2026-11-30T03:00:46|2026-11-30T03:00:47|None"
    state, observation, _ = status_of(tmp_path, "", sacct + f"{SACCT_WHERE}\n")
    assert state is RemoteState.UNKNOWN, observation
