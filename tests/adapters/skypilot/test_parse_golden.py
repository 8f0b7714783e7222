"""The parsers against outputs captured from the real SkyPilot 0.14.1 (tests/data/sky/README.md
says how each was produced)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vibesys.adapters.skypilot.errors import SkyMalformedOutput
from vibesys.adapters.skypilot.parse import (
    ClusterStatus,
    SkyJobStatus,
    allocation_ids,
    exit_code_line,
    parse_job_id,
    parse_logs_status,
    parse_queue,
    parse_status,
    parse_version,
    strip_ansi,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "sky"
CLUSTER = "vs-golden"


def out(name: str) -> str:
    return (DATA / f"{name}.stdout").read_text()


def err(name: str) -> str:
    return (DATA / f"{name}.stderr").read_text()


def rc(name: str) -> int:
    return int((DATA / f"{name}.rc").read_text())


def test_version() -> None:
    assert parse_version(out("version")) == "0.14.1"
    with pytest.raises(SkyMalformedOutput):
        parse_version("skypilot\n")


@pytest.mark.parametrize(
    "name", ["status_empty", "status_empty_refresh", "status_unknown_name", "status_after_down"]
)
def test_status_of_an_empty_state(name: str) -> None:
    assert rc(name) == 0
    assert parse_status(out(name)) == []


def test_status_of_an_up_cluster_names_its_allocation() -> None:
    (record,) = parse_status(out("status_up"))
    assert record.name == CLUSTER and record.status is ClusterStatus.UP
    assert (record.cloud, record.region, record.nodes, record.cpus) == (
        "Slurm",
        "localslurm",
        1,
        "1",
    )
    assert record.accelerators is None
    assert record.allocation == ("107",)
    (relaunched,) = parse_status(out("status_up_relaunched"))
    assert relaunched.allocation != record.allocation


def test_a_lost_allocation_reads_up_until_a_refresh_drops_it() -> None:
    (stale,) = parse_status(out("lost_status_immediate"))
    assert stale.status is ClusterStatus.UP
    assert parse_status(out("lost_status_refresh")) == []
    assert "Cluster(s) not found" in strip_ansi(out("lost_status_refresh"))


def test_exec_prints_the_job_id_only_in_its_submission_line() -> None:
    assert parse_job_id(out("exec_detached_probe")) == 1
    assert parse_job_id(out("exec_detached_sleeper")) == 4
    assert parse_job_id(out("exec_attached_exit3")) == 3
    assert rc("exec_attached_exit3") == 100  # the client never sees the real 3
    with pytest.raises(SkyMalformedOutput):
        parse_job_id(out("gone_exec"))


def test_exec_on_a_missing_or_expired_cluster() -> None:
    assert rc("gone_exec") == 1 and "ClusterDoesNotExist" in err("gone_exec")
    assert rc("lost_exec_immediate") == 1
    assert "CommandError" in err("lost_exec_immediate")
    assert "has expired" in out("lost_exec_immediate")


def test_queue_lists_jobs_newest_first_without_exit_codes() -> None:
    jobs = parse_queue(out("queue_mixed"), CLUSTER)
    assert jobs is not None
    assert [(j.job_id, j.status) for j in jobs] == [
        (4, SkyJobStatus.RUNNING),
        (3, SkyJobStatus.FAILED),
        (2, SkyJobStatus.SUCCEEDED),
        (1, SkyJobStatus.SUCCEEDED),
    ]
    assert jobs[0].job_name == "sleeper" and jobs[3].job_name == "vibesys-probe"
    after = parse_queue(out("queue_after_cancel"), CLUSTER)
    assert after is not None and after[0].status is SkyJobStatus.CANCELLED


@pytest.mark.parametrize("name", ["lost_queue", "gone_queue", "queue_unknown"])
def test_queue_that_could_not_ask_is_none_with_rc_0(name: str) -> None:
    cluster = "nosuch" if name == "queue_unknown" else CLUSTER
    assert rc(name) == 0
    assert parse_queue(out(name), cluster) is None


@pytest.mark.parametrize(
    ("name", "code", "status"),
    [
        ("logs_status_succeeded", 0, SkyJobStatus.SUCCEEDED),
        ("logs_status_failed", 100, SkyJobStatus.FAILED),
        ("logs_status_running", 101, SkyJobStatus.RUNNING),
        ("logs_status_cancelled", 103, SkyJobStatus.CANCELLED),
        ("logs_status_missing", 102, None),
    ],
)
def test_logs_status(name: str, code: int, status: SkyJobStatus | None) -> None:
    assert rc(name) == code
    assert parse_logs_status(out(name))[1] == status


def test_control_commands_and_their_exit_statuses() -> None:
    assert rc("cancel_job") == 0 and "Cancelled job ID(s): 4" in out("cancel_job")
    assert rc("cancel_unknown_cluster") == 2 and "does not exist" in err("cancel_unknown_cluster")
    assert rc("down_unknown") == 0 and rc("gone_down") == 0
    assert rc("down_up") == 0 and "Terminating cluster vs-golden...done." in out("down_up")
    assert rc("launch_fresh") == 0 and "Cluster launched: vs-golden." in strip_ansi(
        out("launch_fresh")
    )


def test_exit_code_line_is_read_through_skypilots_prefix_and_trailer() -> None:
    log = (
        "\x1b[36m(vibesys-x-1, pid=12)\x1b[0m vibesys: exit_code=3\n"
        "ERROR: \x1b[31mJob 3 failed with return code list:\x1b[0m [3] \n"
        "\x1b[0m\x1b[32m✓ Job finished (status: FAILED).\x1b[0m\x1b[0m\n"
    )
    assert exit_code_line(log) == 3
    assert exit_code_line("(x, pid=1) vibesys: exit_code=3\n(x, pid=1) more output\n") is None
    assert exit_code_line(out("logs_no_follow_failed")) is None  # a plain command prints none


def test_allocation_ids_from_node_names() -> None:
    assert allocation_ids("job107-node1,job107-node2") == ("107",)
    assert allocation_ids(None) == ()
    assert allocation_ids("node1") == ()


def test_malformed_json_is_typed() -> None:
    with pytest.raises(SkyMalformedOutput):
        parse_status("[\n  {broken\n")
    with pytest.raises(SkyMalformedOutput):
        parse_queue("Fetching job queue for: x\n", "x")
    with pytest.raises(SkyMalformedOutput):
        parse_queue('{"other": []}\n', "x")


def test_the_wrappers_last_line_in_a_real_skypilot_log() -> None:
    # Captured by tests/slurm/test_skypilot_live.py: the command exited 3, SkyPilot says 100.
    assert exit_code_line(out("wrapper_exit3_sky_log")) == 3
