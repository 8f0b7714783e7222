"""JobResult: the mapping from the journal's states, outcomes and failure classes (oracles
written out here, never read from the module), the exit statuses, and the result of real runs
read back through `vibesys.result`, `vibesys result` and `run --json`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import vibesys
from tests.helpers.cli import vibesys_cli
from vibesys.bridge import client
from vibesys.job_result import (
    JobResult,
    JobStatus,
    NotEnded,
    exit_status_of,
    job_result,
    status_of,
)
from vibesys.journal_schema import HistoryRow, Invocation
from vibesys.states import FailureClass, JobState, Outcome
from vibesys.states.exits import exit_status

S, Out, F = JobState, Outcome, FailureClass

#: (state, outcome, last failure class, who asked for a cancel) -> the status, written out.
MAPPING: list[tuple[JobState, Outcome | None, FailureClass | None, str | None, str | None]] = [
    (S.DONE, Out.COMPLETED, F.COMPLETED, None, "COMPLETED"),
    (S.DONE, Out.APPLICATION_FAILED, F.APPLICATION_FAILED, None, "APPLICATION_FAILED"),
    (S.DONE, Out.CANCELLED, F.CANCELLED, "interrupt", "CANCELLED"),
    (S.DONE, Out.CANCELLED, F.CANCELLED, "session teardown: SIGTERM received", "CANCELLED"),
    (S.DONE, Out.CANCELLED, F.CANCELLED, "timeout: 75 s", "TIMEOUT"),
    (S.DONE, Out.CANCELLED, None, None, "CANCELLED"),
    (S.DONE, Out.INFRA_FAILED, F.ALLOCATION_EXPIRED, None, "ALLOCATION_EXPIRED"),
    (S.DONE, Out.INFRA_FAILED, F.NODE_FAILED, None, "NODE_FAILED"),
    (S.DONE, Out.INFRA_FAILED, F.PREEMPTED, None, "PREEMPTED"),
    (S.DONE, Out.INFRA_FAILED, F.TRANSPORT_LOST, None, "TRANSPORT_LOST"),
    (S.DONE, Out.INFRA_FAILED, None, None, "UNRESOLVED"),
    (S.DONE, Out.REJECTED, None, None, "REJECTED"),
    (S.DONE, Out.MISCONFIGURED, None, None, "MISCONFIGURED"),
    (S.DONE, Out.DEPENDENCY_FAILED, F.DEPENDENCY_FAILED, None, "DEPENDENCY_FAILED"),
    (S.UNRESOLVED, None, None, None, "UNRESOLVED"),
    (S.COLLECTING, None, F.COMPLETED, None, "UNRESOLVED"),
    (S.PREPARED, None, None, None, None),
    (S.SUBMITTING, None, None, None, None),
    (S.RUNNING, None, None, "interrupt", None),
    (S.RETRYING, None, F.NODE_FAILED, None, None),
]


def invocation(
    state: JobState, outcome: Outcome | None, failure: FailureClass | None
) -> Invocation:
    return Invocation(
        id="1a2b3c4d5e6f7a8b",
        label=None,
        adapter="sbatch",
        command=["python", "eval.py"],
        recorded_request={},
        state=state,
        version=4,
        attempt=1,
        max_retries=2,
        retries=0,
        outcome=outcome,
        exit_code=3
        if outcome is Out.APPLICATION_FAILED
        else 0
        if outcome is Out.COMPLETED
        else None,
        failure_class=failure,
        cancel_requested=False,
        not_before=None,
        invocation_dir="/runs/1a2b3c4d5e6f7a8b",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        updated_at=datetime(2026, 1, 1, 0, 0, 9, tzinfo=UTC),
        lease_owner=None,
        lease_expires_at=None,
    )


_T1 = datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)


def history(cancel_by: str | None) -> list[HistoryRow]:
    rows = [HistoryRow(1, S.PREPARED, S.SUBMITTING, "SubmitIntended", _T1, {})]
    if cancel_by is not None:
        rows.append(
            HistoryRow(
                2,
                S.RUNNING,
                S.RUNNING,
                "CancelRequested",
                datetime(2026, 1, 1, 0, 0, 5, tzinfo=UTC),
                {"by": cancel_by},
            )
        )
    return rows


@pytest.mark.parametrize(("state", "outcome", "failure", "by", "expected"), MAPPING)
def test_the_mapping_table(
    state: JobState,
    outcome: Outcome | None,
    failure: FailureClass | None,
    by: str | None,
    expected: str | None,
) -> None:
    inv = invocation(state, outcome, failure)
    if expected is None:
        with pytest.raises(NotEnded, match=f"has not ended \\({state}\\)"):
            job_result(inv, [], history(by))
        assert (
            job_result(inv, [], history(by), unfinished=JobStatus.UNRESOLVED).status == "UNRESOLVED"
        )
        return
    found = job_result(inv, [], history(by))
    assert found.status == expected
    assert (found.state, found.outcome, found.failure_class) == (state, outcome, failure)


def test_an_outcome_named_timeout_maps_to_timeout() -> None:
    # The timeout outcome is still to come; its mapping point reads the outcome's name.
    inv = invocation(S.DONE, Out.CANCELLED, None).evolve({"outcome": "TIMEOUT"})
    assert status_of(inv, history(None)) == "TIMEOUT"


#: status -> exit status of vibesys-eval (exit code 3 for APPLICATION_FAILED), written out.
EXITS = {
    "COMPLETED": 0,
    "APPLICATION_FAILED": 3,
    "ALLOCATION_EXPIRED": 75,
    "NODE_FAILED": 75,
    "PREEMPTED": 75,
    "TRANSPORT_LOST": 75,
    "CANCELLED": 130,
    "UNRESOLVED": 4,
    "TIMEOUT": 124,
    "REJECTED": 2,
    "MISCONFIGURED": 78,
    "DEPENDENCY_FAILED": 66,
}


@pytest.mark.parametrize(("status", "code"), EXITS.items())
def test_exit_statuses(status: str, code: int) -> None:
    inv = invocation(S.DONE, Out.APPLICATION_FAILED, F.APPLICATION_FAILED)
    found = job_result(inv, [], history(None)).model_copy(update={"status": JobStatus(status)})
    assert exit_status_of(found) == code
    assert set(EXITS) == set(JobStatus)


#: Where `vibesys-eval` says more than `vibesys run`: a timeout's cancel (124, not 130), and
#: an infrastructure failure of no known class (UNRESOLVED, 4: the result never guesses one).
FINER = {"TIMEOUT", "UNRESOLVED"}


ALIKE = [r for r in MAPPING if r[4] is not None and not (r[4] in FINER and r[0] is S.DONE)]


@pytest.mark.parametrize(("state", "outcome", "failure", "by", "expected"), ALIKE)
def test_run_and_eval_exit_alike(
    state: JobState,
    outcome: Outcome | None,
    failure: FailureClass | None,
    by: str | None,
    expected: str,
) -> None:
    """One set of exit statuses (vibesys.states.exits): `vibesys run`'s for an ended record
    and `vibesys-eval`'s for its JobResult agree but where the result is finer."""
    inv = invocation(state, outcome, failure)
    found = job_result(inv, [], history(by))
    assert found.status == expected
    assert exit_status_of(found) == exit_status(inv)


def test_an_application_failure_without_a_code_still_fails() -> None:
    inv = invocation(S.DONE, Out.APPLICATION_FAILED, F.APPLICATION_FAILED).evolve(
        {"exit_code": None}
    )
    assert exit_status_of(job_result(inv, [], history(None))) == 1


def test_the_helper_documents_the_same_statuses() -> None:
    doc = client.__doc__ or ""
    for code, what in (
        (2, "refused"),
        (4, "unresolved"),
        (75, "infrastructure"),
        (78, "misconfigured"),
        (124, "timed out"),
        (130, "cancelled"),
        (255, "the bridge could not be reached"),
    ):
        assert f"{code} {what}" in " ".join(doc.split()), (code, what)


def test_the_model_is_strict_and_frozen() -> None:
    found = job_result(invocation(S.DONE, Out.COMPLETED, F.COMPLETED), [], history(None))
    text = found.model_dump_json()
    assert JobResult.model_validate_json(text) == found
    data: dict[str, Any] = json.loads(text)
    with pytest.raises(ValueError, match="Extra inputs"):
        JobResult.model_validate_json(json.dumps({**data, "surprise": 1}))
    with pytest.raises(ValueError, match="frozen"):
        found.status = JobStatus.CANCELLED  # type: ignore[misc]


def test_results_of_real_runs(tmp_path: Path) -> None:
    ok = vibesys_cli("run", "--json", "--", "sh", "-c", "echo hi; echo oops >&2", cwd=tmp_path)
    shown = json.loads(ok.stdout)
    assert shown["result"]["status"] == "COMPLETED" and shown["result"]["exit_code"] == 0
    found = vibesys.result(tmp_path / ".vibesys" / "journal.db", shown["id"])
    assert found.invocation_id == shown["id"] and found.attempt == 1
    assert Path(str(found.stdout_path)).read_text() == "hi\n"
    assert Path(str(found.stderr_path)).read_text() == "oops\n"
    times = found.times
    assert times.accepted_at <= str(times.queued_at) <= str(times.ended_at)
    bad = vibesys_cli("run", "--json", "--", "sh", "-c", "exit 3", cwd=tmp_path)
    failed = json.loads(bad.stdout)["result"]
    assert (failed["status"], failed["exit_code"], bad.returncode) == ("APPLICATION_FAILED", 3, 3)
    text = vibesys_cli("result", failed["invocation_id"][:10], cwd=tmp_path)
    assert text.returncode == 0
    assert "status      APPLICATION_FAILED  exit 3  attempt 1" in text.stdout
    as_json = vibesys_cli("result", failed["invocation_id"], "--json", cwd=tmp_path)
    assert json.loads(as_json.stdout) == failed
    waited = vibesys_cli("wait", failed["invocation_id"], "--json", cwd=tmp_path)
    assert waited.returncode == 3 and json.loads(waited.stdout)["result"] == failed


def test_result_of_an_unfinished_run_says_so(tmp_path: Path) -> None:
    detached = vibesys_cli("run", "--detach", "--", "sleep", "30", cwd=tmp_path)
    invocation_id = detached.stdout.strip()
    try:
        waiting = vibesys_cli("result", invocation_id, cwd=tmp_path)
        assert waiting.returncode == 1
        assert "has not ended (RUNNING)" in waiting.stderr and len(waiting.stderr.splitlines()) == 1
    finally:
        vibesys_cli("cancel", invocation_id, cwd=tmp_path)
