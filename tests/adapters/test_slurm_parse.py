"""Parsing real Slurm 22.05 output (tests/data/*) and classifying it into RemoteState."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vibesys.adapters.base import RemoteState, RemoteStatus
from vibesys.adapters.slurm.parse import (
    SACCT_FIELDS,
    SACCT_FORMAT,
    SLURM_STATES,
    SQUEUE_FORMAT,
    SacctRow,
    SqueueRow,
    UnparseableOutput,
    classify,
    parse_marker,
    parse_sacct,
    parse_sbatch_parsable,
    parse_squeue,
    parse_started,
    sacct_argv,
    squeue_argv,
)
from vibesys.adapters.slurm.site_parse import (
    SINFO_FORMAT,
    parse_sinfo_partitions,
    parse_slurm_minutes,
    sinfo_argv,
)
from vibesys.errors import BackendUnavailable

DATA = Path(__file__).resolve().parents[1] / "data"


def data(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


#: The formats the older captures were made with (before the provenance fields were added).
OLD_SACCT = SACCT_FIELDS[:7]
OLD_SQUEUE = "%i|%j|%T|%r|%P|%b"
#: The captures of a waiting job's reason: with the nodes, without the times.
SQUEUE_WITH_NODES = "%i|%j|%T|%r|%P|%b|%N"


def sacct_by_id(name: str, fields: tuple[str, ...] = OLD_SACCT) -> dict[str, SacctRow]:
    return {row.job_id: row for row in parse_sacct(data(name), fields)}


VERIFIED = sacct_by_id("sacct/verified_doc_states.txt", SACCT_FIELDS[:6])
OBSERVED = sacct_by_id("sacct/observed_with_reason.txt")
EDGES = sacct_by_id("sacct/constructed_edge_cases.txt")


# --- formats and argv -------------------------------------------------------------------------


def test_the_formats_are_the_ones_the_parsers_read() -> None:
    assert SACCT_FORMAT == (
        "JobID,JobName,State,ExitCode,Start,End,Reason,Partition,NodeList,AllocTRES"
    )
    assert SQUEUE_FORMAT == "%i|%j|%T|%r|%P|%b|%N|%S|%e|%C"
    assert SINFO_FORMAT == "%R %l"


def test_query_argv() -> None:
    assert sacct_argv(job_ids=["19", "20"]) == [
        "sacct", "-X", "-n", "-P", "-o", SACCT_FORMAT, "-j", "19,20",
    ]  # fmt: skip
    assert sacct_argv(names=["a", "b"], since="now-300")[-4:] == ["--name", "a,b", "-S", "now-300"]
    assert squeue_argv(names=["a", "b"]) == [
        "squeue", "-h", "--states=all", "-o", SQUEUE_FORMAT, "--name", "a,b",
    ]  # fmt: skip
    assert squeue_argv(job_ids=["7"])[-2:] == ["-j", "7"]
    assert sinfo_argv() == ["sinfo", "-h", "-o", SINFO_FORMAT]
    with pytest.raises(ValueError):
        sacct_argv(job_ids=["1"], names=["a"])
    with pytest.raises(ValueError):
        squeue_argv()


# --- sbatch -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "job_id"),
    [("sbatch_out/parsable.txt", "22"), ("sbatch_out/parsable_cluster.txt", "24")],
)
def test_parse_sbatch_parsable(name: str, job_id: str) -> None:
    assert parse_sbatch_parsable(data(name)) == job_id


@pytest.mark.parametrize(
    "text",
    [data("sbatch_out/not_parsable.txt"), "", "\n", "22\n23\n", "22;", "x22", "-1", "22;a b"],
)
def test_anything_else_from_sbatch_is_unparseable_and_may_have_submitted(text: str) -> None:
    with pytest.raises(UnparseableOutput) as caught:
        parse_sbatch_parsable(text)
    assert isinstance(caught.value, BackendUnavailable)
    assert caught.value.maybe_submitted is True
    # The raw output is the evidence; for an empty one, the message saying so.
    assert caught.value.evidence == (text or str(caught.value))
    assert f"printed {text.strip()!r}" in str(caught.value)


# --- sacct ------------------------------------------------------------------------------------


def test_sacct_rows_from_the_verified_notes() -> None:
    assert sorted(VERIFIED, key=int) == ["1", "11", "12", "16", "18", "20", "71", "74"]
    cancelled = VERIFIED["12"]
    assert (cancelled.state, cancelled.cancelled_by) == ("CANCELLED", "0")
    assert (VERIFIED["11"].exit_status, VERIFIED["11"].exit_signal) == (2, 0)
    assert VERIFIED["1"].start == datetime(2026, 11, 30, 1, 52, 7)
    assert VERIFIED["71"].end is None
    assert VERIFIED["74"].start is None
    assert VERIFIED["1"].reason is None
    assert (
        VERIFIED["16"].line == "16|t-timeout10s|TIMEOUT|0:0|2026-11-30T01:38:40|2026-11-30T01:40:07"
    )


def test_sacct_rows_with_reason_observed_on_the_cluster() -> None:
    assert OBSERVED["21"].reason == "Dependency"
    assert OBSERVED["7"].start is None  # "None": cancelled before it started
    assert (OBSERVED["6"].state, OBSERVED["6"].cancelled_by, OBSERVED["6"].exit_signal) == (
        "CANCELLED",
        None,
        15,
    )


def test_a_pipe_in_a_job_name_does_not_shift_the_fields() -> None:
    row = EDGES["35"]
    assert (row.job_name, row.state, row.reason) == ("name|with|pipes", "COMPLETED", "None")


def test_an_empty_exit_code_is_unknown() -> None:
    assert (EDGES["36"].exit_status, EDGES["36"].exit_signal) == (None, None)


def test_step_rows_are_skipped() -> None:
    text = "21|wrap|NODE_FAIL|0:0|a|b|None\n21.batch|batch|CANCELLED||a|b|None\n"
    assert [row.job_id for row in parse_sacct(text, OLD_SACCT)] == ["21"]


@pytest.mark.parametrize(
    "text",
    ["1|x|COMPLETED|0:0", "1|x|COMPLETED|zero|a|b|None", "1|x|COMPLETED|0|a|b|None"],
)
def test_bad_sacct_lines_are_unparseable(text: str) -> None:
    with pytest.raises(UnparseableOutput):
        parse_sacct(text, OLD_SACCT)


def test_sacct_fields_must_include_the_essentials() -> None:
    with pytest.raises(ValueError, match="ExitCode"):
        parse_sacct("", ("JobID", "JobName", "State"))


# --- squeue -----------------------------------------------------------------------------------


def test_squeue_verified_line_in_the_notes_format() -> None:
    [row] = parse_squeue(data("squeue/verified_doc_running.txt"), "%i|%j|%T|%M|%l|%P|%N|%b")
    assert row == SqueueRow(
        job_id="69",
        job_name="c-b",
        state="RUNNING",
        reason=None,
        partition="main",
        gres="N/A",
        line="69|c-b|RUNNING|0:01|30:00|main|node1|N/A",
        nodes="node1",
    )


def test_squeue_observed_rows() -> None:
    rows = {
        row.job_id: row for row in parse_squeue(data("squeue/observed_all_states.txt"), OLD_SQUEUE)
    }
    assert rows["17"].gres == "gres:gpu:2"
    assert (rows["21"].state, rows["21"].reason) == ("CANCELLED", "DependencyNeverSatisfied")
    assert rows["11"].partition == "priority"
    assert parse_squeue("", OLD_SQUEUE) == []


def test_squeue_name_with_pipe() -> None:
    [row] = parse_squeue("9|a|b|RUNNING|None|main|N/A\n", OLD_SQUEUE)
    assert (row.job_name, row.state, row.partition) == ("a|b", "RUNNING", "main")


def test_short_squeue_line_is_unparseable() -> None:
    with pytest.raises(UnparseableOutput):
        parse_squeue("slurm_load_jobs error: Invalid job id specified\n", OLD_SQUEUE)


# --- sinfo ------------------------------------------------------------------------------------


def test_sinfo_verified_and_observed() -> None:
    assert parse_sinfo_partitions(data("sinfo/verified_doc_P.txt")) == {"main": 30, "priority": 120}
    assert parse_sinfo_partitions(data("sinfo/observed_R.txt")) == {
        "main": 30,
        "priority": 120,
        "short": 5,
    }


def test_sinfo_other_formats_and_duplicates() -> None:
    assert parse_sinfo_partitions(data("sinfo/constructed_limits.txt")) == {
        "long": 1440,
        "open": None,
        "half": 2160,
        "main": 20,
    }


@pytest.mark.parametrize(
    ("text", "limits"),
    [
        ("a 30:00\na infinite\n", {"a": 30}),
        ("a infinite\na 20:00\n", {"a": 20}),
        ("a infinite\na infinite\n", {"a": None}),
        ("a 30:00\na 20:00\n", {"a": 20}),
    ],
)
def test_a_partition_on_several_lines_keeps_its_smallest_limit(
    text: str, limits: dict[str, int | None]
) -> None:
    assert parse_sinfo_partitions(text) == limits


@pytest.mark.parametrize("text", ["main\n", "main 30:00 extra\n", "main soon\n"])
def test_bad_sinfo_is_unparseable(text: str) -> None:
    with pytest.raises(UnparseableOutput):
        parse_sinfo_partitions(text)


@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        ("30:00", 30),
        ("2:00:00", 120),
        ("1-00:00:00", 1440),
        ("1-02", 1560),
        ("1-02:03", 1563),
        ("45", 45),
        ("0:59", 0),
        ("30:30", 30),
        ("infinite", None),
        ("UNLIMITED", None),
    ],
)
def test_parse_slurm_minutes(text: str, minutes: int | None) -> None:
    assert parse_slurm_minutes(text) == minutes


@given(
    days=st.integers(0, 30),
    hours=st.integers(0, 23),
    mins=st.integers(0, 59),
    secs=st.integers(0, 59),
)
def test_slurm_time_as_sinfo_prints_it(days: int, hours: int, mins: int, secs: int) -> None:
    if days:
        text = f"{days}-{hours:02d}:{mins:02d}:{secs:02d}"
    elif hours:
        text = f"{hours}:{mins:02d}:{secs:02d}"
    else:
        text = f"{mins}:{secs:02d}"
    assert parse_slurm_minutes(text) == days * 1440 + hours * 60 + mins


# --- markers ----------------------------------------------------------------------------------


def test_markers() -> None:
    assert parse_marker("137\n") == 137
    for bad in ("", "-1", "256", "3\n4", "abc"):
        with pytest.raises(UnparseableOutput):
            parse_marker(bad)
    assert parse_started("host=node1\nstarted_at=2026-11-30T02:51:34Z\nslurm_job_id=19\n") == {
        "host": "node1",
        "started_at": "2026-11-30T02:51:34Z",
        "slurm_job_id": "19",
    }


# --- classification ---------------------------------------------------------------------------


def status(
    row: SacctRow | SqueueRow, marker: int | None = None, ours: bool = False
) -> RemoteStatus:
    return classify(row, marker, ours)


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
        ("21", RemoteState.CANCELLED),
    ],
)
def test_other_terminal_states(job_id: str, state: RemoteState) -> None:
    row = EDGES.get(job_id) or OBSERVED[job_id]
    assert status(row).state is state


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
