"""Reading jobs' markers (vibesys/adapters/rundir/markers.py): the remote script, run by a real
`sh`, reads what the local file reads read, and a status round's combined command keeps
squeue's output and its failures apart from the markers."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from vibesys.adapters.rundir.claim import fence_text
from vibesys.adapters.rundir.markers import (
    ROUND_SPLIT,
    Markers,
    parse_markers,
    read_here,
    round_script,
)

JOB_CLAIM = "kind=job\nhost=node1\nstarted_at=2026-11-30T02:51:34Z\nslurm_job_id=19\n"


def run_dirs(tmp_path: Path) -> dict[str, str]:
    """Directories in every state a round meets, by the job name they belong to."""
    layout = {
        "ended": {"exit_code": "3\n", "claim": JOB_CLAIM},
        "running": {"claim": JOB_CLAIM},
        "fenced": {"claim": fence_text("me", "2026-11-30T00:00:00Z", "lost")},
        "setup": {"setup_failed": "86\n", "claim": JOB_CLAIM},
        "no-newline": {"exit_code": "0", "claim": JOB_CLAIM.rstrip("\n")},
        "spaces in name": {"exit_code": "-1\n"},
        "garbage": {"exit_code": "abc\n", "claim": "not a claim\n"},
    }
    dirs = {}
    for name, files in layout.items():
        directory = tmp_path / name
        directory.mkdir()
        for file, text in files.items():
            (directory / file).write_text(text)
        dirs[str(directory)] = name
    dirs[str(tmp_path / "missing")] = "missing"
    return dirs


def remote(script: str, dirs: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-c", script, "vibesys-round", *dirs],
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_remote_script_reads_what_the_files_hold(tmp_path: Path) -> None:
    dirs = run_dirs(tmp_path)
    done = remote(round_script(["printf", "%s\\n", "squeue line"]), dirs)
    assert done.returncode == 0, done.stderr
    queue, split, rest = done.stdout.partition(f"{ROUND_SPLIT}\n")
    assert (queue, split) == ("squeue line\n", f"{ROUND_SPLIT}\n")
    read = parse_markers(rest, dirs)
    here = read_here(dirs)
    assert read.read == here.read == set(dirs.values())
    assert read.codes == here.codes == {"ended": 3, "no-newline": 0, "spaces in name": -1}
    assert read.setup_failed == here.setup_failed == {"setup": 86}
    assert {n: c.kind for n, c in read.claims.items()} == {
        "ended": "job",
        "running": "job",
        "fenced": "fence",
        "setup": "job",
        "no-newline": "job",
    }
    assert {n: c.fields for n, c in read.claims.items()} == {
        n: c.fields for n, c in here.claims.items()
    }


def test_a_failing_squeue_is_the_rounds_failure_and_reads_no_marker(tmp_path: Path) -> None:
    dirs = run_dirs(tmp_path)
    done = remote(round_script(["sh", "-c", "echo slurmctld down >&2; exit 1"]), dirs)
    assert done.returncode == 1
    assert "slurmctld down" in done.stderr
    assert ROUND_SPLIT not in done.stdout


def test_only_keeps_what_concerns_the_names(tmp_path: Path) -> None:
    here = read_here(run_dirs(tmp_path))
    part = here.only(["ended", "setup", "unknown"])
    claims = {name: here.claims[name] for name in ("ended", "setup")}
    assert part == Markers({"ended", "setup"}, {"ended": 3}, {"setup": 86}, claims)


@pytest.mark.parametrize("count", [1, 300])
def test_a_round_starts_no_process_per_job(tmp_path: Path, count: int) -> None:
    """Builtins only: with `cat` and `tr` out of PATH the markers are still read."""
    dirs = {}
    for index in range(count):
        directory = tmp_path / f"j{index}"
        directory.mkdir()
        (directory / "exit_code").write_text(f"{index % 256}\n")
        dirs[str(directory)] = f"j{index}"
    done = subprocess.run(
        ["/bin/sh", "-c", round_script(["true"]), "vibesys-round", *dirs],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": str(tmp_path / "nothing-here")},
    )
    assert done.returncode == 0, done.stderr
    rest = done.stdout.partition(f"{ROUND_SPLIT}\n")[2]
    assert parse_markers(rest, dirs).codes == {f"j{i}": i % 256 for i in range(count)}


@pytest.mark.parametrize("caught_up", [True, False])
def test_a_forgotten_claimed_job_is_final_only_once_sacct_has_caught_up(
    tmp_path: Path, caught_up: bool
) -> None:
    # squeue forgot it, sacct shows nothing, the job claimed and left no marker: it ended
    # without its status, and nothing will tell how. But while the attempt is younger than
    # the site's sacct lag, sacct's silence proves nothing yet: sacct may still tell.
    from vibesys.adapters.base import JobRef, RemoteState
    from vibesys.adapters.rundir.claim import Claim
    from vibesys.adapters.slurm.status_rules import absent_status

    job = JobRef("vibesys-x-1", "77", tmp_path)
    claim = Claim("job", {"kind": "job", "slurm_job_id": "77"})
    status = absent_status(job, claim, None, sacct_caught_up=caught_up)
    assert (status.state, status.final, status.claim) == (RemoteState.NOT_FOUND, caught_up, claim)
    unclaimed = absent_status(job, None, None, sacct_caught_up=caught_up)
    assert not unclaimed.final
    ended = absent_status(job, claim, 0, sacct_caught_up=caught_up)
    assert (ended.state, ended.exit_code) == (RemoteState.COMPLETED, 0)


def test_squeue_rows_of_a_name_go_to_the_attempt_whose_job_they_are(tmp_path: Path) -> None:
    # Two jobs carry one attempt's name (a manual resubmission): an attempt whose job id is
    # known gets its own job's row only; one not yet known gets the earliest submitted.
    from vibesys.adapters.base import JobRef
    from vibesys.adapters.slurm.parse import parse_squeue
    from vibesys.adapters.slurm.status_rules import rows_by_name

    rows = parse_squeue(
        "41|vibesys-a-1|RUNNING|None|main|N/A|node1|2026-12-01T05:00:00|N/A|1\n"
        "57|vibesys-a-1|FAILED|NonZeroExitCode|main|N/A|node1|N/A|N/A|1\n"
        "60|vibesys-b-1|PENDING|Priority|main|N/A||N/A|N/A|1\n"
    )
    known = JobRef("vibesys-a-1", "41", tmp_path)
    assert rows_by_name(rows, [known])["vibesys-a-1"].job_id == "41"
    gone = JobRef("vibesys-a-1", "39", tmp_path)  # its job is not among the rows at all
    assert "vibesys-a-1" not in rows_by_name(rows, [gone])
    unknown = JobRef("vibesys-a-1", None, tmp_path)
    assert rows_by_name(rows, [unknown])["vibesys-a-1"].job_id == "41"
    assert rows_by_name(rows[::-1], [unknown])["vibesys-a-1"].job_id == "41"
    assert rows_by_name(rows, [known])["vibesys-b-1"].job_id == "60"
