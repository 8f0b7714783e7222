"""Slurm's state words and classify()'s outcomes against oracles written out by hand (never
read from the product's map), and the invariants every classification keeps."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers.slurm_captures import OLD_SACCT, OLD_SQUEUE, SQUEUE_WITH_NODES, data, status
from vibesys.adapters.base import RemoteState
from vibesys.adapters.slurm.parse import (
    SLURM_STATES,
    SacctRow,
    SqueueRow,
    classify,
    parse_sacct,
    parse_squeue,
)
from vibesys.adapters.slurm.provenance import provenance

# --- the state map: a hard-coded oracle ----------------------------------------------------------

P, R = RemoteState.PENDING, RemoteState.RUNNING

#: Slurm's base job states (job_state_codes, as listed in the project's peers notes).
BASE_STATES = frozenset(
    {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY"}
    | {"PENDING", "PREEMPTED", "RUNNING", "SUSPENDED", "TIMEOUT"}
)
#: Flags squeue and sacct report instead of the base state when present (same sources, and
#: REQUEUED/COMPLETING/CONFIGURING as seen on the local cluster).
FLAGS = frozenset(
    {"COMPLETING", "CONFIGURING", "LAUNCH_FAILED", "REQUEUED", "REQUEUE_HOLD", "SPECIAL_EXIT"}
    | {"RESIZING", "STOPPED", "REQUEUE_FED", "RESV_DEL_HOLD", "SIGNALING", "STAGE_OUT"}
)

#: What each state word must mean, written out here and never read from the product's map.
#: Not yet running or held: PENDING. Alive (or finishing): RUNNING. UNKNOWN is never guessed
#: to be an end.
STATE_ORACLE: dict[str, RemoteState] = {
    "PENDING": P,
    "CONFIGURING": P,  # nodes booting for it
    "REQUEUED": P,  # back in the queue after a requeue
    "REQUEUE_HOLD": P,
    "REQUEUE_FED": P,
    "RESV_DEL_HOLD": P,
    "SUSPENDED": P,  # stopped by the scheduler, will resume
    "STOPPED": P,  # SIGSTOPped, keeps its allocation
    "RUNNING": R,
    "COMPLETING": R,  # epilogs still running: the command's end is not final yet
    "SIGNALING": R,
    "STAGE_OUT": R,
    "RESIZING": R,
    "COMPLETED": RemoteState.COMPLETED,
    "FAILED": RemoteState.FAILED,
    "CANCELLED": RemoteState.CANCELLED,
    "TIMEOUT": RemoteState.TIMEOUT,
    "DEADLINE": RemoteState.TIMEOUT,  # --deadline is a time limit the submitter set
    "OUT_OF_MEMORY": RemoteState.OUT_OF_MEMORY,
    "NODE_FAIL": RemoteState.NODE_FAIL,
    "BOOT_FAIL": RemoteState.BOOT_FAIL,
    "PREEMPTED": RemoteState.PREEMPTED,
    "LAUNCH_FAILED": RemoteState.LAUNCH_FAILED,
    # Requeued and held by a site's epilog after a chosen exit value: we submit --no-requeue,
    # so it means something we did not ask for. Not an end, not a start: unknown.
    "SPECIAL_EXIT": RemoteState.UNKNOWN,
    "REVOKED": RemoteState.UNKNOWN,  # a federation sibling: not ours to judge
    "SOMETHING_NEW": RemoteState.UNKNOWN,
}


def test_the_oracle_covers_every_documented_state_and_flag() -> None:
    assert set(STATE_ORACLE) >= BASE_STATES | FLAGS


def test_the_product_maps_no_state_the_oracle_does_not_judge() -> None:
    assert set(SLURM_STATES) <= set(STATE_ORACLE)


@pytest.mark.parametrize(("slurm_state", "state"), sorted(STATE_ORACLE.items()))
def test_state_mapping(slurm_state: str, state: RemoteState) -> None:
    sacct_row = parse_sacct(f"5|j|{slurm_state}|0:0|None|None|None", OLD_SACCT)[0]
    assert status(sacct_row).state is state
    # squeue appends `+` to a state of a job that has more to it (e.g. a REQUEUED flag).
    squeue_row = parse_squeue(f"5|j|{slurm_state}+|None|main|N/A", OLD_SQUEUE)[0]
    assert status(squeue_row).state is state


# --- classify(): a hard-coded oracle of outcomes ----------------------------------------------

C = RemoteState

#: (source, State column, ExitCode, marker, cancel requested by us)
#:     -> (RemoteState, exit code, cancelled_by)
CLASSIFY_ORACLE = [
    # Ended on its own: the marker wins, else ExitCode `a:b` (128+b for a signal).
    (("sacct", "COMPLETED", "0:0", None, False), (C.COMPLETED, 0, None)),
    (("sacct", "COMPLETED", "0:0", 0, False), (C.COMPLETED, 0, None)),
    (("sacct", "COMPLETED", "0:0", 3, False), (C.FAILED, 3, None)),  # non-zero is never success
    (("sacct", "COMPLETED", "0:0", None, True), (C.COMPLETED, 0, None)),  # asked, ended first
    (("sacct", "FAILED", "2:0", None, False), (C.FAILED, 2, None)),
    (("sacct", "FAILED", "0:9", None, False), (C.FAILED, 137, None)),
    (("sacct", "FAILED", "1:0", 5, False), (C.FAILED, 5, None)),
    (("sacct", "FAILED", "1:0", 0, False), (C.FAILED, 0, None)),  # the state stays FAILED
    (("sacct", "FAILED", "", None, False), (C.FAILED, None, None)),
    # Ended by Slurm: ExitCode describes the kill, only the marker is the command's status.
    (("sacct", "CANCELLED by 0", "0:15", None, False), (C.CANCELLED, None, "0")),
    (("sacct", "CANCELLED by 0", "0:15", None, True), (C.CANCELLED, None, "vibesys")),
    (("sacct", "CANCELLED", "0:15", 143, False), (C.CANCELLED, 143, None)),
    (("sacct", "TIMEOUT", "0:0", None, False), (C.TIMEOUT, None, None)),
    (("sacct", "TIMEOUT", "0:0", 143, True), (C.TIMEOUT, 143, None)),
    (("sacct", "DEADLINE", "0:0", None, False), (C.TIMEOUT, None, None)),
    (("sacct", "OUT_OF_MEMORY", "0:125", None, False), (C.OUT_OF_MEMORY, None, None)),
    (("sacct", "OUT_OF_MEMORY", "0:125", 137, False), (C.OUT_OF_MEMORY, 137, None)),
    (("sacct", "NODE_FAIL", "", None, False), (C.NODE_FAIL, None, None)),
    (("sacct", "NODE_FAIL", "1:0", None, True), (C.NODE_FAIL, None, None)),
    (("sacct", "PREEMPTED", "0:15", None, False), (C.PREEMPTED, None, None)),
    (("sacct", "BOOT_FAIL", "0:0", None, False), (C.BOOT_FAIL, None, None)),
    (("sacct", "LAUNCH_FAILED", "1:0", None, False), (C.LAUNCH_FAILED, None, None)),
    # Not ended: no exit code, even with a marker (a stale one from an earlier run).
    (("sacct", "RUNNING", "0:0", 0, False), (C.RUNNING, None, None)),
    (("sacct", "PENDING", "0:0", None, True), (C.PENDING, None, None)),
    (("sacct", "COMPLETING", "0:0", 0, False), (C.RUNNING, None, None)),
    (("sacct", "REVOKED", "0:0", 0, False), (C.UNKNOWN, None, None)),
    # squeue has no ExitCode: only the marker says how the command ended.
    (("squeue", "COMPLETED", None, None, False), (C.COMPLETED, None, None)),
    (("squeue", "COMPLETED", None, 2, False), (C.FAILED, 2, None)),
    (("squeue", "FAILED", None, None, False), (C.FAILED, None, None)),
    (("squeue", "FAILED", None, 4, False), (C.FAILED, 4, None)),
    (("squeue", "CANCELLED", None, None, False), (C.CANCELLED, None, None)),
    (("squeue", "CANCELLED", None, 143, True), (C.CANCELLED, 143, "vibesys")),
    (("squeue", "RUNNING", None, 0, True), (C.RUNNING, None, None)),
]


def case_id(value: object) -> str:
    if isinstance(value, tuple):
        return "-".join(str(part).replace(" ", "_") for part in value)
    return str(value)


@pytest.mark.parametrize(("given", "expected"), CLASSIFY_ORACLE, ids=case_id)
def test_classify_outcomes(
    given: tuple[str, str, str | None, int | None, bool],
    expected: tuple[RemoteState, int | None, str | None],
) -> None:
    source, state_column, exit_code, marker, ours = given
    row: SacctRow | SqueueRow
    if source == "sacct":
        line = f"7|vibesys-abc-1|{state_column}|{exit_code}|None|None|None"
        row = parse_sacct(line, OLD_SACCT)[0]
    else:
        line = f"7|vibesys-abc-1|{state_column}|None|main|N/A"
        row = parse_squeue(line, OLD_SQUEUE)[0]
    result = classify(row, marker, ours)
    assert (result.state, result.exit_code, result.cancelled_by) == expected
    assert (result.job_id, result.job_name) == ("7", "vibesys-abc-1")
    assert result.observation.startswith(f"{source}: {line}")


def test_the_sacct_lag_placeholder_is_unknown_whatever_it_says() -> None:
    row = parse_sacct("7|allocation|COMPLETED|0:0|None|None|None", OLD_SACCT)[0]
    result = classify(row, 0, False, job_name="vibesys-abc-1")
    assert (result.state, result.exit_code, result.job_name) == (C.UNKNOWN, None, "vibesys-abc-1")


def test_squeue_rows_classify_without_exit_codes() -> None:
    rows = {
        row.job_id: row for row in parse_squeue(data("squeue/constructed_states.txt"), OLD_SQUEUE)
    }
    assert status(rows["40"]).state is RemoteState.FAILED
    assert status(rows["40"]).exit_code is None
    assert status(rows["40"], marker=3).exit_code == 3
    assert status(rows["41"]).state is RemoteState.NODE_FAIL
    assert status(rows["42"]).state is RemoteState.TIMEOUT
    assert status(rows["43"]).state is RemoteState.PENDING
    assert status(rows["45"]).observation == "squeue: 45|multi|PENDING|Priority|main,priority|N/A"


@given(
    slurm_state=st.sampled_from(sorted(STATE_ORACLE)),
    a=st.integers(0, 255),
    b=st.integers(0, 64),
    marker=st.one_of(st.none(), st.integers(0, 255)),
    ours=st.booleans(),
)
def test_classification_invariants(
    slurm_state: str, a: int, b: int, marker: int | None, ours: bool
) -> None:
    row = parse_sacct(f"5|job|{slurm_state}|{a}:{b}|None|None|None", OLD_SACCT)[0]
    result = classify(row, marker, ours)
    assert result.state is STATE_ORACLE[slurm_state] or (
        slurm_state == "COMPLETED" and result.state is RemoteState.FAILED
    )
    if result.state is RemoteState.COMPLETED:
        assert result.exit_code == 0
    if marker is not None and result.exit_code is not None:
        assert result.exit_code == marker
    if result.state in (RemoteState.PENDING, RemoteState.RUNNING):
        assert result.exit_code is None
    assert (result.cancelled_by is not None) <= (result.state is RemoteState.CANCELLED)
    assert row.line in result.observation


def test_squeue_rows_carry_reason_partition_and_nodes_to_the_status() -> None:
    captured = data("squeue/observed_with_nodes.txt")
    rows = {row.job_id: row for row in parse_squeue(captured, SQUEUE_WITH_NODES)}
    assert {i: (r.state, r.reason, r.partition, r.nodes) for i, r in rows.items()} == {
        "508": ("PENDING", "Resources", "main", None),
        "509": ("PENDING", "Priority", "main", None),
        "507": ("PENDING", "JobHeldUser", "main", None),
        "506": ("RUNNING", "None", "main", "node1"),
    }
    waiting = classify(rows["508"], None, False)
    assert (waiting.state, waiting.reason, waiting.partition, waiting.nodes) == (
        C.PENDING,
        "Resources",
        "main",
        None,
    )
    running = classify(rows["506"], None, False)
    # squeue's "None" is no reason at all.
    assert (running.state, running.reason, running.nodes) == (C.RUNNING, None, "node1")


# --- a chained job killed by Slurm (`--kill-on-invalid-dep=yes`): lines from the local cluster --

#: (source, line) -> (RemoteState, cancelled_by), as Slurm 22.05 printed them: a child whose
#: parent's job failed, killed by Slurm (no uid, reason DependencyNeverSatisfied in squeue,
#: Dependency in sacct); one scancelled while it waited (`by 0`); one left pending (`=no`).
KILLED_ORACLE = [
    (
        (
            "squeue",
            "20|vibesys-abc-1|CANCELLED|DependencyNeverSatisfied|main|N/A||2026-12-06T13:58:59|2026-12-06T13:58:59|1",
        ),
        (C.DEPENDENCY_NEVER_SATISFIED, None),
    ),
    (
        (
            "sacct",
            "20|vibesys-abc-1|CANCELLED|0:0|"
            "2026-12-06T13:58:59|2026-12-06T13:58:59|Dependency|main|None assigned|",
        ),
        (C.DEPENDENCY_NEVER_SATISFIED, None),
    ),
    (
        (
            "squeue",
            "4|vibesys-abc-1|CANCELLED|Dependency|main|N/A||2026-12-06T13:47:08|2026-12-06T13:47:08|1",
        ),
        (C.CANCELLED, None),
    ),
    (
        (
            "sacct",
            "4|vibesys-abc-1|CANCELLED by 0|0:0|"
            "2026-12-06T13:47:08|2026-12-06T13:47:08|Dependency|main|None assigned|",
        ),
        (C.CANCELLED, "0"),
    ),
    (
        ("squeue", "21|vibesys-abc-1|PENDING|DependencyNeverSatisfied|main|N/A||N/A|N/A|1"),
        (C.PENDING, None),
    ),
    (
        (
            "sacct",
            "21|vibesys-abc-1|PENDING|0:0|"
            "Unknown|Unknown|DependencyNeverSatisfied|main|None assigned|",
        ),
        (C.PENDING, None),
    ),
]


@pytest.mark.parametrize(("given", "expected"), KILLED_ORACLE, ids=case_id)
def test_a_job_slurm_killed_for_its_dependency_is_told_apart(
    given: tuple[str, str], expected: tuple[RemoteState, str | None]
) -> None:
    source, line = given
    row = parse_sacct(line)[0] if source == "sacct" else parse_squeue(line)[0]
    result = classify(row, None, False)
    assert (result.state, result.exit_code, result.cancelled_by) == (
        *expected[:1],
        None,
        expected[1],
    )
    # Never started: where it ran is nothing, whatever sacct's Start says.
    if result.state is C.DEPENDENCY_NEVER_SATISFIED:
        assert {"start", "nodes", "tres", "cpus"}.isdisjoint(provenance(row)), provenance(row)
