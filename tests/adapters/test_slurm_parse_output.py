"""Parsing real Slurm 22.05 output (tests/data/*): the formats and argv of the queries, and
what sbatch, sacct, squeue, sinfo and the job's markers print."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers.slurm_captures import (
    EDGES,
    OBSERVED,
    OLD_SACCT,
    OLD_SQUEUE,
    VERIFIED,
    data,
)
from vibesys.adapters.slurm.parse import (
    SACCT_FORMAT,
    SQUEUE_FORMAT,
    SqueueRow,
    UnparseableOutput,
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
