"""A lost allocation named by how Slurm says it ended (preempted, its wall time, a node failure),
against the fake `sky` and its login node's sacct; and the sacct answers that name nothing."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.helpers.skyfake import FakeSky, ref
from tests.helpers.skyfake import submit_request as request
from vibesys.adapters.base import JobRef, RemoteState
from vibesys.adapters.rundir.remote import RunDirs
from vibesys.adapters.skypilot import SkyPilotBackend
from vibesys.adapters.skypilot.allocation_end import allocation_ends
from vibesys.adapters.transports.base import CommandResult
from vibesys.errors import BackendUnavailable


def running_job(fake: FakeSky) -> tuple[SkyPilotBackend, JobRef]:
    backend = fake.backend()
    backend.ensure_lease()
    doomed = request(fake, "inv-p", 1, ["sleep", "30"])
    job = ref(doomed, backend.submit(doomed).job_id)
    for _ in range(100):
        if backend.dirs.state(job).claim is not None:
            break
        backend.status([job])
    assert backend.status([job])[job.job_name].state is RemoteState.RUNNING
    return backend, job


@pytest.mark.parametrize(
    ("recorded", "state"),
    [
        ("PREEMPTED", RemoteState.PREEMPTED),
        ("TIMEOUT", RemoteState.ALLOCATION_EXPIRED),
        ("NODE_FAIL", RemoteState.NODE_FAIL),
        ("CANCELLED by 0", RemoteState.ALLOCATION_EXPIRED),
        ("NONE", RemoteState.ALLOCATION_EXPIRED),  # sacct has no record of it
    ],
)
def test_a_lost_allocation_is_named_by_slurms_record(
    fake_sky: FakeSky, recorded: str, state: RemoteState
) -> None:
    backend, job = running_job(fake_sky)
    assert fake_sky.calls("--sacct") == []  # nothing lost, nothing asked
    fake_sky.control("fake-lose", backend.cluster, "--as", recorded)
    lost = backend.status([job])[job.job_name]
    assert (lost.state, lost.exit_code) == (state, None)
    word = recorded.split(" ")[0] if recorded != "NONE" else "none"
    assert f"Slurm's record of allocation 200: {word}" in lost.observation
    [asked] = fake_sky.calls("--sacct")
    assert asked[asked.index("-j") + 1] == "200"
    # On the relaunched cluster the attempt keeps its name: its claim names the old one.
    second = backend.launch(backend.plan_lease())
    assert second.allocation == ("201",)
    assert backend.status([job])[job.job_name].state is state


def test_an_unanswered_sacct_leaves_the_loss_an_expiry(fake_sky: FakeSky) -> None:
    backend, job = running_job(fake_sky)
    broken = fake_sky.venv / "fakebin" / "sacct"
    broken.write_text(
        "#!/bin/sh\necho 'sacct: error: Problem talking to the database' >&2\nexit 1\n"
    )
    fake_sky.control("fake-lose", backend.cluster, "--as", "PREEMPTED")
    lost = backend.status([job])[job.job_name]
    assert lost.state is RemoteState.ALLOCATION_EXPIRED
    assert "Slurm's record of allocation 200: none" in lost.observation


class Answers:
    """A login node whose sacct prints `stdout` with `rc`, or cannot be reached."""

    def __init__(self, stdout: str, rc: int = 0, fails: bool = False) -> None:
        self.stdout, self.rc, self.fails = stdout, rc, fails
        self.calls: list[list[str]] = []

    def run(self, argv: Sequence[str], **_: object) -> CommandResult:
        self.calls.append(list(argv))
        if self.fails:
            raise BackendUnavailable("ssh: connection refused")
        return CommandResult(self.rc, self.stdout, "", tuple(argv))


def ends(answers: Answers, *allocations: str) -> dict[str, str]:
    return allocation_ends(RunDirs(answers, "/remote", timeout=5), allocations)  # type: ignore[arg-type]


def test_sacct_rows_are_read_as_slurm_prints_them(tmp_path: Path) -> None:
    rows = (
        "200|c-0123abcd|PREEMPTED|0:15|2026-11-30T02:45:10|2026-11-30T02:45:11|None|main|node1|cpu=1\n"
        "201|c-0123abcd|CANCELLED by 0|0:15|2026-11-30T02:45:10|2026-11-30T02:46:11|None|main|"
        "node1|cpu=1\n"
        "202|c-0123abcd|TIMEOUT|0:15|2026-11-30T02:45:10|2026-11-30T03:05:10|None|main|node1|"
        "cpu=1\n"
    )
    answers = Answers(rows)
    assert ends(answers, "200", "201", "202") == {
        "200": "PREEMPTED",
        "201": "CANCELLED",
        "202": "TIMEOUT",
    }
    [argv] = answers.calls
    assert argv[0] == "sacct" and argv[argv.index("-j") + 1] == "200,201,202"


@pytest.mark.parametrize(
    "answers",
    [
        # slurmdbd has not written the final record yet: the placeholder's state is stale
        Answers("200|allocation|RUNNING|0:0|2026-11-30T02:45:10|Unknown|None|main|node1|cpu=1\n"),
        Answers("", rc=1),
        Answers("sacct: some banner nobody expected\n"),
        Answers("", fails=True),
    ],
    ids=["sacct-lag", "sacct-fails", "unreadable", "unreachable"],
)
def test_what_names_no_end_is_no_record(answers: Answers) -> None:
    assert ends(answers, "200") == {}
