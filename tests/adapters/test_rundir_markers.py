"""Reading jobs' markers (vibesys/adapters/rundir/markers.py): the remote script, run by real
shells, reads what the local file reads read, whatever the files and the directories' names
hold; the exit code's written time comes from one process or is absent; a status round's
combined command keeps squeue's output and its failures apart from the markers; SkyPilot's
login-node reader and Slurm's round refuse an answer cut short."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from vibesys.adapters.base import JobRef
from vibesys.adapters.rundir.claim import fence_text
from vibesys.adapters.rundir.markers import (
    NO_MARKERS,
    ROUND_SPLIT,
    DirState,
    parse_markers,
    read_here,
    read_script,
    round_script,
)
from vibesys.adapters.skypilot.run_dirs import RunDirs
from vibesys.adapters.transports import CommandResult, LocalTransport
from vibesys.errors import BackendUnavailable

JOB_CLAIM = "kind=job\nhost=node1\nstarted_at=2026-11-30T02:51:34Z\nslurm_job_id=19\n"
#: What a wrapper that found the attempt claimed leaves, with the kinds of text a claim may
#: carry that a line-based format must not mistake for its own (tabs, \r, the old separator
#: byte, the prefix of the script's own lines, a last line without its newline).
REFUSED = (
    "vibesys: this attempt is claimed by someone else; nothing was run\n"
    "kind=fence\n\tby=host:1:2\n"
    "reason=a\ttab and a \r carriage return\x1fand \x1e separators\n"
    "1 claim|not a line of the script\n"
    "2\n"
    "@1700000000 /not/a/time\n"
    "\n"
    "last line without a newline"
)
ODD_CLAIM = (
    "kind=job\n  host = node 1  \nslurm_job_id=19|20\nnote=a=b\tc|d\n"
    "é ünïcode ☃\n=no key\nno equals sign\nstarted_at=2026-11-30T02:51:34Z"
)
SHELLS = [s for s in ("/bin/sh", shutil.which("bash"), shutil.which("busybox")) if s]


def attempt_dirs(tmp_path: Path) -> dict[str, str]:
    """Directories in every state a round meets, by the job name they belong to."""
    layout: dict[str, dict[str, str | bytes]] = {
        "ended": {"exit_code": "3\n", "claim": JOB_CLAIM},
        "running": {"claim": JOB_CLAIM},
        "fenced": {"claim": fence_text("me", "2026-11-30T00:00:00Z", "lost")},
        "setup": {"setup_failed": "86\n", "exit_code": "86\n", "claim": JOB_CLAIM},
        "no-newline": {"exit_code": "0", "claim": JOB_CLAIM.rstrip("\n")},
        "spaces in name": {"exit_code": "-1\n"},
        "tab\tand\nnewline": {"exit_code": "7\n", "claim": JOB_CLAIM},
        "garbage": {"exit_code": "--5\n", "setup_failed": "²\n", "claim": "not a claim\n"},
        "refused": {"refused": REFUSED, "claim": fence_text("me", "now", "lost")},
        "odd claim": {"claim": ODD_CLAIM, "exit_code": " 12 \r\n"},
        "empty files": {"exit_code": "", "setup_failed": "", "claim": "", "refused": ""},
        "binary": {"claim": b"kind=job\nhost=\xff\xfe\x00x\n", "refused": b"\xc3\n"},
        "-starts-with-a-dash": {"exit_code": "0\n"},
    }
    dirs = {}
    for name, files in layout.items():
        directory = tmp_path / name
        directory.mkdir()
        for file, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            (directory / file).write_bytes(data)
        dirs[str(directory)] = name
    dirs[str(tmp_path / "missing")] = "missing"
    (tmp_path / "unreadable").mkdir(mode=0)
    dirs[str(tmp_path / "unreadable")] = "unreadable"
    return dirs


def remote(
    script: str, dirs: dict[str, str], shell: str = "/bin/sh", path: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`script` run over `dirs`, its output decoded as a transport decodes it."""
    env = None if path is None else {"PATH": path}
    argv = [shell, "-c", script, "vibesys-round", *dirs]
    done = subprocess.run(argv, capture_output=True, check=False, env=env)
    out, err = (b.decode("utf-8", "replace") for b in (done.stdout, done.stderr))
    return subprocess.CompletedProcess(argv, done.returncode, out, err)


@pytest.mark.parametrize("shell", SHELLS)
def test_the_remote_script_reads_what_the_files_hold(tmp_path: Path, shell: str) -> None:
    dirs = attempt_dirs(tmp_path)
    done = remote(round_script(["printf", "%s\\n", "squeue line"]), dirs, shell)
    assert done.returncode == 0, done.stderr
    queue, split, rest = done.stdout.partition(f"{ROUND_SPLIT}\n")
    assert (queue, split) == ("squeue line\n", f"{ROUND_SPLIT}\n")
    read = parse_markers(rest, dirs)
    assert read == read_here(dirs)
    assert set(read) == set(dirs.values())
    codes = {n: s.exit_code for n, s in read.items() if s.exit_code is not None}
    assert codes == {
        "ended": 3,
        "no-newline": 0,
        "spaces in name": -1,
        "tab\tand\nnewline": 7,
        "odd claim": 12,
        "-starts-with-a-dash": 0,
    }
    # A failed setup's exit code is the setup's, not a command's.
    assert read["setup"] == DirState(read["ended"].claim, None, None, 86)
    assert {n: s.claim.kind for n, s in read.items() if s.claim is not None} == {
        "ended": "job",
        "running": "job",
        "fenced": "fence",
        "setup": "job",
        "no-newline": "job",
        "tab\tand\nnewline": "job",
        "refused": "fence",
        "odd claim": "job",
        "binary": "job",
    }
    for name in ("missing", "unreadable", "garbage"):
        assert read[name] == NO_MARKERS, name
    assert read["empty files"] == DirState(None, None, "", None)


def test_a_refused_text_comes_back_whole(tmp_path: Path) -> None:
    dirs = attempt_dirs(tmp_path)
    rest = remote(round_script(["true"]), dirs).stdout.partition(f"{ROUND_SPLIT}\n")[2]
    refused = parse_markers(rest, dirs)["refused"].refused
    assert refused == REFUSED + "\n"  # every line ended, the last one too
    assert "\ttab" in refused and "\r carriage" in refused and "\x1f" in refused
    assert read_here(dirs)["refused"].refused == refused


def test_an_odd_claim_reads_as_its_lines_say(tmp_path: Path) -> None:
    dirs = attempt_dirs(tmp_path)
    rest = remote(round_script(["true"]), dirs).stdout.partition(f"{ROUND_SPLIT}\n")[2]
    claim = parse_markers(rest, dirs)["odd claim"].claim
    assert claim is not None and claim.text == ODD_CLAIM + "\n"
    assert claim.get("host") == "node 1"
    assert claim.get("slurm_job_id") == "19|20"
    assert claim.get("note") == "a=b\tc|d"
    assert claim.get("é ünïcode ☃") == ""
    assert claim.get("started_at") == "2026-11-30T02:51:34Z"


def test_a_failing_squeue_is_the_rounds_failure_and_reads_no_marker(tmp_path: Path) -> None:
    dirs = attempt_dirs(tmp_path)
    done = remote(round_script(["sh", "-c", "echo slurmctld down >&2; exit 1"]), dirs)
    assert done.returncode == 1
    assert "slurmctld down" in done.stderr
    assert ROUND_SPLIT not in done.stdout


@pytest.mark.parametrize("count", [1, 1000])
def test_a_round_starts_no_process_per_job(tmp_path: Path, count: int) -> None:
    """Builtins only: with no command on PATH the markers are still read, and the round is
    fine without the written times' one process."""
    dirs = {}
    for index in range(count):
        directory = tmp_path / f"j {index}"
        directory.mkdir()
        (directory / "exit_code").write_text(f"{index % 256}\n")
        (directory / "claim").write_text(JOB_CLAIM.replace("19", str(index)))
        dirs[str(directory)] = f"j{index}"
    nothing = str(tmp_path / "nothing-here")
    for script in (round_script(["true"]), read_script(times=True)):  # `true` is a builtin
        done = remote(script, dirs, path=nothing)
        assert done.returncode == 0, done.stderr
        read = parse_markers(done.stdout.rpartition(f"{ROUND_SPLIT}\n")[2], dirs)
        assert {n: s.exit_code for n, s in read.items()} == {f"j{i}": i % 256 for i in range(count)}
        assert {n: s.claim.get("slurm_job_id") for n, s in read.items() if s.claim} == {
            f"j{i}": str(i) for i in range(count)
        }
        assert {s.exit_written_at for s in read.values()} == {None}


def _ended(tmp_path: Path, names: list[str]) -> dict[str, str]:
    dirs = {}
    for index, name in enumerate(names):
        directory = tmp_path / name
        directory.mkdir(parents=True)
        if index % 2 == 0:
            (directory / "exit_code").write_text("0\n")
            os.utime(directory / "exit_code", (1_700_000_000 + index, 1_700_000_000 + index))
        dirs[str(directory)] = name
    return dirs


def test_the_written_times_come_from_one_process(tmp_path: Path) -> None:
    names = [f"d {i}" for i in range(50)] + ["new\nline", "x", "tab\there"]  # ended: even
    dirs = _ended(tmp_path / "dirs", names)
    bin_dir, log = tmp_path / "bin", tmp_path / "started"
    bin_dir.mkdir()
    real = shutil.which("find")
    assert real is not None
    (bin_dir / "find").write_text(f'#!/bin/sh\necho "$$" >> "{log}"\nexec {real} "$@"\n')
    (bin_dir / "find").chmod(0o755)
    done = remote(read_script(times=True), dirs, path=str(bin_dir))
    assert done.returncode == 0, done.stderr
    assert len(log.read_text().splitlines()) == 1
    read = parse_markers(done.stdout, dirs)
    expected = {name: float(1_700_000_000 + i) for i, name in enumerate(names) if i % 2 == 0}
    # A name with a newline cannot be told apart in find's output: its time is absent.
    expected.pop("new\nline", None)
    assert {n: s.exit_written_at for n, s in read.items() if s.exit_written_at} == expected
    assert read["new\nline"].exit_code == 0
    here = read_here(dirs, times=True)
    assert {n: s.exit_written_at for n, s in here.items() if s.exit_written_at} == {
        **expected,
        "new\nline": 1_700_000_000.0 + names.index("new\nline"),
    }
    assert {s.exit_written_at for s in read_here(dirs).values()} == {None}


@pytest.mark.parametrize(
    "find",
    [
        "echo 'find: -printf: unknown primary or operator' >&2; exit 1",  # a BSD find
        'for d; do echo "@soon $d/exit_code"; echo "@-1 $d/exit_code"; done; echo 1700000000',
        "exit 0",
    ],
)
def test_without_a_usable_find_the_written_time_is_absent(tmp_path: Path, find: str) -> None:
    dirs = _ended(tmp_path / "dirs", ["a", "b"])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "find").write_text(f"#!/bin/sh\n{find}\n")
    (bin_dir / "find").chmod(0o755)
    done = remote(read_script(times=True), dirs, path=str(bin_dir))
    assert done.returncode == 0, done.stderr
    read = parse_markers(done.stdout, dirs)
    assert read["a"] == DirState(None, 0, None, None, None)
    assert read["b"] == NO_MARKERS


def job(invocation: str, attempt: int) -> JobRef:
    return JobRef(
        f"vibesys-{invocation}-{attempt}", None, Path("/nonexistent"), None, invocation, attempt
    )


def test_skypilots_reader_is_one_command_with_the_written_times(tmp_path: Path) -> None:
    root = tmp_path / "root with spaces"
    jobs = [job("inv", attempt) for attempt in range(1, 6)]
    for attempt, files in enumerate(
        [{"exit_code": "0\n", "claim": JOB_CLAIM}, {"refused": REFUSED}, {}, {"claim": "x"}], 1
    ):
        directory = root / "inv" / str(attempt)
        directory.mkdir(parents=True)
        for file, text in files.items():
            (directory / file).write_text(text)
    os.utime(root / "inv" / "1" / "exit_code", (1_700_000_000, 1_700_000_000))
    calls: list[list[str]] = []

    class Counting(LocalTransport):
        def run(self, argv, **kwargs):  # type: ignore[no-untyped-def, override]
            calls.append(list(argv))
            return super().run(argv, **kwargs)

    dirs = RunDirs(Counting(), str(root))
    states = dirs.states(jobs)
    assert len(calls) == 1
    assert states == read_here(
        {str(dirs.remote_attempt_dir(j)): j.job_name for j in jobs}, times=True
    )
    assert states["vibesys-inv-1"].exit_written_at == 1_700_000_000.0
    assert states["vibesys-inv-2"].refused == REFUSED + "\n"
    assert states["vibesys-inv-3"] == states["vibesys-inv-5"] == NO_MARKERS
    assert dirs.state(jobs[0]) == states["vibesys-inv-1"]
    assert dirs.states([]) == {} and len(calls) == 2


class Answering:
    def __init__(self, out: str) -> None:
        self.out = out

    def run(self, argv, **kwargs):  # type: ignore[no-untyped-def]
        """The reading command's answer is `out`; sacct knows nothing."""
        return CommandResult(0, self.out if argv[0] == "sh" else "", "", tuple(argv))


@pytest.mark.parametrize("cut", ["", "1 exit_code\n1 exit_code|0\n", "1\n2 claim|kind=job\n"])
def test_an_answer_cut_short_is_refused(cut: str) -> None:
    from vibesys.adapters.slurm.backend import SlurmBackend
    from vibesys.config.load import parse_slurm_config

    jobs = [job("inv", 1), job("inv", 2)]
    with pytest.raises(BackendUnavailable, match="cut short"):
        RunDirs(Answering(cut), "/r").states(jobs)  # type: ignore[arg-type]
    config = parse_slurm_config(
        '[slurm]\nname = "s"\nremote_workspace_root = "/r"\n'
        '[slurm.transport]\nkind = "ssh"\nhost = "login"\nuser = "me"\n'
    )
    scheduler = SlurmBackend(config, Answering(f"{ROUND_SPLIT}\n{cut}"))  # type: ignore[arg-type]
    with pytest.raises(BackendUnavailable, match="cut short"):
        scheduler.status(jobs)
    whole = SlurmBackend(config, Answering(f"{ROUND_SPLIT}\n{cut}1\n2\n"))  # type: ignore[arg-type]
    assert set(whole.status(jobs)) == {j.job_name for j in jobs}


@pytest.mark.parametrize("caught_up", [True, False])
def test_a_forgotten_claimed_job_is_final_only_once_sacct_has_caught_up(
    tmp_path: Path, caught_up: bool
) -> None:
    # squeue forgot it, sacct shows nothing, the job claimed and left no marker: it ended
    # without its status, and nothing will tell how. But while the attempt is younger than
    # the site's sacct lag, sacct's silence proves nothing yet: sacct may still tell.
    from vibesys.adapters.base import RemoteState
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
