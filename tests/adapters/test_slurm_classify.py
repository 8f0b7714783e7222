"""Classifying captured sacct and squeue rows into RemoteState: the verified states, whose
cancel it was, the marker against ExitCode, and sacct's lag placeholder."""

from __future__ import annotations

import pytest

from tests.helpers.slurm_captures import EDGES, OBSERVED, OLD_SQUEUE, VERIFIED, status
from vibesys.adapters.base import RemoteState
from vibesys.adapters.slurm.parse import classify, parse_squeue

# --- classification ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("job_id", "state", "exit_code"),
    [
        ("1", RemoteState.COMPLETED, 0),
        ("11", RemoteState.FAILED, 2),
        ("12", RemoteState.CANCELLED, None),
        ("16", RemoteState.TIMEOUT, None),
        ("18", RemoteState.PREEMPTED, None),
        ("20", RemoteState.NODE_FAIL, None),
        ("71", RemoteState.RUNNING, None),
        ("74", RemoteState.PENDING, None),
    ],
)
def test_classify_verified_rows_without_markers(
    job_id: str, state: RemoteState, exit_code: int | None
) -> None:
    row = VERIFIED[job_id]
    result = status(row)
    assert (result.state, result.exit_code) == (state, exit_code)
    assert result.job_id == job_id
    assert result.job_name == row.job_name
    assert row.line in result.observation


def test_cancelled_by_someone_else_keeps_their_uid() -> None:
    assert status(VERIFIED["12"]).cancelled_by == "0"
    assert status(OBSERVED["6"]).cancelled_by is None


def test_cancelled_at_our_request_says_vibesys() -> None:
    assert status(VERIFIED["12"], ours=True).cancelled_by == "vibesys"
    squeue_row = parse_squeue("11|wrap|CANCELLED|None|priority|N/A", OLD_SQUEUE)[0]
    assert status(squeue_row, ours=True).cancelled_by == "vibesys"


def test_asking_to_cancel_does_not_rewrite_how_a_job_ended() -> None:
    result = status(VERIFIED["1"], marker=0, ours=True)
    assert (result.state, result.cancelled_by) == (RemoteState.COMPLETED, None)


def test_the_marker_is_preferred_to_exit_code() -> None:
    result = status(OBSERVED["19"], marker=3)
    assert (result.state, result.exit_code) == (RemoteState.FAILED, 3)
    assert result.observation == f"sacct: {OBSERVED['19'].line}; marker exit_code=3"


def test_sigkilled_batch_script_without_a_marker_is_128_plus_9() -> None:
    result = status(EDGES["30"])
    assert (result.state, result.exit_code) == (RemoteState.FAILED, 137)


def test_completed_with_a_nonzero_marker_is_never_success() -> None:
    assert status(VERIFIED["1"], marker=1).state is RemoteState.FAILED


def test_a_killed_job_reports_the_commands_marker_only() -> None:
    # ExitCode 0:15 on a cancelled job describes the kill, not the command.
    assert status(OBSERVED["6"]).exit_code is None
    assert status(OBSERVED["6"], marker=143).exit_code == 143


def test_marker_of_a_running_job_is_not_an_exit_code_yet() -> None:
    result = status(VERIFIED["71"], marker=0)
    assert (result.state, result.exit_code) == (RemoteState.RUNNING, None)


@pytest.mark.parametrize("job_id", ["31", "32"])
def test_the_sacct_lag_placeholder_is_not_evidence(job_id: str) -> None:
    result = classify(EDGES[job_id], 0, False, job_name="vibesys-abc-1")
    assert result.state is RemoteState.UNKNOWN
    assert result.exit_code is None
    assert result.job_name == "vibesys-abc-1"
    assert "sacct lag" in result.observation


@pytest.mark.parametrize(
    ("job_id", "state"),
    [
        ("33", RemoteState.OUT_OF_MEMORY),
        ("34", RemoteState.TIMEOUT),
        ("36", RemoteState.NODE_FAIL),
        # Killed by Slurm, no uid, reason Dependency: its parent's job had failed.
        ("21", RemoteState.DEPENDENCY_NEVER_SATISFIED),
        ("15", RemoteState.CANCELLED),  # `CANCELLED by 0`: a scancel
    ],
)
def test_other_terminal_states(job_id: str, state: RemoteState) -> None:
    row = EDGES.get(job_id) or OBSERVED[job_id]
    assert status(row).state is state
