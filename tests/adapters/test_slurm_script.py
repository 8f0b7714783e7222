"""The batch script and srun argv: golden files, shell validity, and argv surviving for real."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import structs

from tests.helpers.golden_files import assert_matches_golden
from vibesys.adapters.rundir.claim import CLAIM_FILE, REFUSED_EXIT
from vibesys.adapters.slurm.script import (
    EXIT_CODE_FILE,
    SRUN_WRAPPER,
    InvalidJobSpec,
    SlurmJobSpec,
    render_sbatch,
    sbatch_argv,
    srun_argv,
)
from vibesys.adapters.transports import LocalTransport
from vibesys.errors import UsageError

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "sbatch"
ROOT = PurePosixPath("/shared/vibesys")

ARG = st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=20)
NAME = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,40}\Z")

CASES = {
    "basic": SlurmJobSpec(
        job_name="vibesys-0123abcd-1",
        command=("python3", "eval.py", "--out", "results.json"),
        remote_attempt_dir=ROOT / "0123abcd" / "1",
        time_minutes=30,
        partitions=("main",),
    ),
    "gpus_dependency_site_args": SlurmJobSpec(
        job_name="vibesys-0123abcd-bench-2",
        command=("./bench", "--iterations=10"),
        remote_attempt_dir=ROOT / "0123abcd" / "2",
        time_minutes=120,
        gpus=2,
        partitions=("main", "priority"),
        extra_arguments=("--account=lab", "--qos=normal", "--mail-user=ops@example.org"),
        dependency="22",
        workdir=PurePosixPath("/shared/projects/kernel"),
    ),
    "odd_argv": SlurmJobSpec(
        job_name="vibesys-odd-1",
        command=("A=1", "it's", "$(rm -rf /)", "`id`", "two words", "line\nbreak", "$HOME", ""),
        remote_attempt_dir=ROOT / "odd" / "1",
        time_minutes=5,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_render_sbatch_matches_the_golden_file(case: str) -> None:
    assert_matches_golden(GOLDEN / f"{case}.sh", render_sbatch(CASES[case]))


def test_there_is_no_stale_golden_file() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.sh")) == sorted(CASES)


def directives(script: str) -> list[str]:
    return [
        line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH")
    ]


def test_directives_without_gpus_or_dependency() -> None:
    assert directives(render_sbatch(CASES["basic"])) == [
        "--job-name=vibesys-0123abcd-1",
        "--no-requeue",
        "--time=30",
        "--partition=main",
        "--output=/shared/vibesys/0123abcd/1/stdout",
        "--error=/shared/vibesys/0123abcd/1/stderr",
        "--chdir=/shared/vibesys/0123abcd/1",
    ]


def test_a_chained_job_is_killed_by_slurm_when_its_parent_job_fails() -> None:
    """A child must never stay PENDING for good (DependencyNeverSatisfied) on a parent's
    failed job when no vibesys process looks again: Slurm kills it, whatever the site's
    DependencyParameters say, and a site that names a mail user hears of it."""
    lines = directives(render_sbatch(CASES["gpus_dependency_site_args"]))
    assert lines[-3:] == [
        "--dependency=afterok:22",
        "--kill-on-invalid-dep=yes",
        "--mail-type=INVALID_DEPEND",
    ]
    assert "--gres=gpu:2" in lines
    assert "--partition=main,priority" in lines
    assert "--chdir=/shared/projects/kernel" in lines
    assert lines.index("--account=lab") < lines.index("--dependency=afterok:22")


@pytest.mark.parametrize(
    ("site", "mail"),
    [
        ((), False),
        (("--account=lab",), False),
        (("--mail-user=ops@example.org",), True),
        (("--mail-user=ops@example.org", "--mail-type=END"), False),  # the site's own choice
    ],
)
def test_invalid_depend_mail_only_where_the_site_names_a_mail_user(
    site: tuple[str, ...], mail: bool
) -> None:
    spec = SlurmJobSpec(
        job_name="vibesys-c-1",
        command=("true",),
        remote_attempt_dir=ROOT / "c" / "1",
        time_minutes=5,
        extra_arguments=site,
        dependency="7",
    )
    lines = directives(render_sbatch(spec))
    assert "--kill-on-invalid-dep=yes" in lines and "--kill-on-invalid-dep=no" not in lines
    assert ("--mail-type=INVALID_DEPEND" in lines) is mail
    unchained = directives(render_sbatch(structs.replace(spec, dependency=None)))
    assert not any(line.startswith(("--kill-on", "--mail-type=INVALID")) for line in unchained)


def test_sbatch_argv_is_parsable() -> None:
    assert sbatch_argv(PurePosixPath("/shared/v/1/job.sbatch")) == [
        "sbatch",
        "--parsable",
        "/shared/v/1/job.sbatch",
    ]


def test_srun_argv_carries_the_resources_then_the_wrapper() -> None:
    spec = SlurmJobSpec(
        job_name="vibesys-gpu-7",
        command=("nvidia-smi", "-L"),
        remote_attempt_dir=ROOT / "gpu" / "7",
        time_minutes=10,
        gpus=1,
        partitions=("main", "priority"),
        extra_arguments=("--account=lab",),
        workdir=PurePosixPath("/work/space"),
    )
    assert srun_argv(spec) == [
        "srun",
        "--job-name=vibesys-gpu-7",
        "--gres=gpu:1",
        "--time=10",
        "--partition=main,priority",
        "--chdir=/work/space",
        "--account=lab",
        "bash",
        "-c",
        SRUN_WRAPPER,
        "vibesys-srun",
        "/shared/vibesys/gpu/7",
        "nvidia-smi",
        "-L",
    ]


def test_srun_omits_gres_without_gpus_and_refuses_dependencies() -> None:
    spec = SlurmJobSpec(
        job_name="j", command=("true",), remote_attempt_dir=ROOT / "j", time_minutes=1
    )
    assert not any(word.startswith("--gres") for word in srun_argv(spec))
    with pytest.raises(InvalidJobSpec):
        srun_argv(
            SlurmJobSpec(
                job_name="j",
                command=("true",),
                remote_attempt_dir=ROOT / "j",
                time_minutes=1,
                dependency="5",
            )
        )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"job_name": "has space"}, "job name"),
        ({"job_name": "new\nline"}, "job name"),
        ({"job_name": "-x"}, "job name"),
        ({"remote_attempt_dir": PurePosixPath("relative/dir")}, "remote_attempt_dir"),
        ({"remote_attempt_dir": PurePosixPath("/shared/%j")}, "remote_attempt_dir"),
        ({"remote_attempt_dir": PurePosixPath("/shared/a b")}, "remote_attempt_dir"),
        ({"remote_attempt_dir": PurePosixPath("/shared/../etc")}, "remote_attempt_dir"),
        ({"workdir": PurePosixPath("/a\nb")}, "workdir"),
        ({"time_minutes": 0}, "time limit"),
        ({"gpus": -1}, "gpus"),
        ({"partitions": ("main,priority",)}, "partition"),
        ({"extra_arguments": ("--comment=a\n#SBATCH --x",)}, "site argument"),
        ({"extra_arguments": ("lab",)}, "site argument"),
        ({"dependency": "22 --x"}, "dependency"),
        ({"command": ()}, "empty command"),
    ],
)
def test_unsafe_specs_are_refused(changes: dict[str, object], message: str) -> None:
    fields: dict[str, object] = {
        "job_name": "ok",
        "command": ("true",),
        "remote_attempt_dir": ROOT / "ok",
        "time_minutes": 1,
        **changes,
    }
    with pytest.raises(UsageError, match=message) as caught:
        SlurmJobSpec(**fields)  # type: ignore[arg-type]
    if message != "empty command":
        assert isinstance(caught.value, ValueError)


def bash_syntax_ok(script: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["bash", "-n"], input=script.encode(), capture_output=True, check=False)


@settings(deadline=None, max_examples=40)
@given(name=NAME, command=st.lists(ARG, min_size=1, max_size=5), gpus=st.integers(0, 8))
def test_every_rendering_is_valid_bash(name: str, command: list[str], gpus: int) -> None:
    spec = SlurmJobSpec(
        job_name=name,
        command=tuple(command),
        remote_attempt_dir=ROOT / name,
        time_minutes=1,
        gpus=gpus,
    )
    result = bash_syntax_ok(render_sbatch(spec))
    assert result.returncode == 0, result.stderr
    assert bash_syntax_ok(SRUN_WRAPPER).returncode == 0


def run_batch_script_locally(
    remote_attempt_dir: Path, args: list[str], exit_with: int
) -> tuple[list[str], int]:
    """Render a job printing its argv, then run the script with bash instead of sbatch."""
    program = f'for a in "$@"; do printf "%s\\0" "$a"; done; exit {exit_with}'
    spec = SlurmJobSpec(
        job_name="local-check",
        command=("bash", "-c", program, "argv0", *args),
        remote_attempt_dir=PurePosixPath(remote_attempt_dir),
        time_minutes=1,
    )
    script = remote_attempt_dir / "job.sbatch"
    script.write_text(render_sbatch(spec), encoding="utf-8")
    result = subprocess.run(
        ["bash", str(script)], capture_output=True, check=False, cwd=remote_attempt_dir
    )
    return result.stdout.decode().split("\0")[:-1], result.returncode


@settings(deadline=None, max_examples=40)
@given(args=st.lists(ARG, max_size=5), exit_with=st.sampled_from([0, 1, 3, 255]))
def test_the_batch_script_passes_argv_intact_and_writes_the_marker(
    args: list[str], exit_with: int
) -> None:
    with tempfile.TemporaryDirectory(prefix="vibesys-sbatch-") as directory:
        remote_attempt_dir = Path(directory)
        received, returncode = run_batch_script_locally(remote_attempt_dir, args, exit_with)
        check_batch_run(remote_attempt_dir, args, received, returncode, exit_with)


def check_batch_run(
    remote_attempt_dir: Path, args: list[str], received: list[str], returncode: int, exit_with: int
) -> None:
    assert received == args
    assert returncode == exit_with
    assert (remote_attempt_dir / EXIT_CODE_FILE).read_text() == f"{exit_with}\n"
    assert not (remote_attempt_dir / f"{EXIT_CODE_FILE}.tmp").exists()
    claim = (remote_attempt_dir / CLAIM_FILE).read_text().splitlines()
    assert [line.split("=", 1)[0] for line in claim] == [
        "kind",
        "host",
        "started_at",
        "slurm_job_id",
        "slurm_node",
        "slurm_partition",
        "slurm_cpus",
    ]
    assert claim[0] == "kind=job"
    assert not list(remote_attempt_dir.glob("claim.*.tmp")), "the temporary claim is removed"


@pytest.mark.parametrize(("signal_name", "code"), [("KILL", 137), ("TERM", 143)])
def test_a_command_killed_by_a_signal_leaves_128_plus_n(
    signal_name: str, code: int, tmp_path: Path
) -> None:
    remote_attempt_dir = tmp_path
    spec = SlurmJobSpec(
        job_name="killed",
        command=("bash", "-c", f"kill -{signal_name} $$"),
        remote_attempt_dir=PurePosixPath(remote_attempt_dir),
        time_minutes=1,
    )
    script = remote_attempt_dir / "job.sbatch"
    script.write_text(render_sbatch(spec), encoding="utf-8")
    result = subprocess.run(["bash", str(script)], capture_output=True, check=False)
    assert result.returncode == code
    assert (remote_attempt_dir / EXIT_CODE_FILE).read_text() == f"{code}\n"


@settings(deadline=None, max_examples=40)
@given(args=st.lists(ARG, min_size=1, max_size=5))
def test_the_srun_command_passes_argv_intact_through_the_transport(args: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="vibesys-srun-") as directory:
        check_srun_run(Path(directory), args)


def check_srun_run(remote_attempt_dir: Path, args: list[str]) -> None:
    spec = SlurmJobSpec(
        job_name="local-check",
        command=("printf", "%s\\0", *args),
        remote_attempt_dir=PurePosixPath(remote_attempt_dir),
        time_minutes=1,
        gpus=1,
        partitions=("main",),
    )
    argv = srun_argv(spec)
    # What srun would run on the node: everything after srun and its options.
    after_options = next(i for i, word in enumerate(argv[1:], 1) if not word.startswith("-"))
    result = LocalTransport().run(argv[after_options:], timeout=10)
    assert result.returncode == 0, result.evidence()
    assert result.stdout.split("\0")[:-1] == args
    assert (remote_attempt_dir / EXIT_CODE_FILE).read_text() == "0\n"
    assert (remote_attempt_dir / CLAIM_FILE).read_text().startswith("kind=job\n")


def test_the_srun_wrapper_keeps_the_command_status(tmp_path: Path) -> None:
    remote_attempt_dir = tmp_path
    spec = SlurmJobSpec(
        job_name="j",
        command=("bash", "-c", "kill -KILL $$"),
        remote_attempt_dir=PurePosixPath(remote_attempt_dir),
        time_minutes=1,
    )
    argv = srun_argv(spec)
    result = LocalTransport().run(argv[argv.index("bash") :], timeout=10)
    assert result.returncode == 137
    assert (remote_attempt_dir / EXIT_CODE_FILE).read_text() == "137\n"


@pytest.mark.parametrize("holder", ["kind=fence\nby=engine\n", "kind=job\nslurm_job_id=7\n"])
def test_a_claimed_attempt_runs_nothing_in_a_batch_job(holder: str, tmp_path: Path) -> None:
    """The fence (or a duplicate job's claim) wins: the command never starts, and the job
    leaves `refused` with the holder's claim and exits 85."""
    remote_attempt_dir = tmp_path
    (remote_attempt_dir / CLAIM_FILE).write_text(holder)
    witness = remote_attempt_dir / "ran"
    spec = SlurmJobSpec(
        job_name="fenced",
        command=("touch", str(witness)),
        remote_attempt_dir=PurePosixPath(remote_attempt_dir),
        time_minutes=1,
    )
    script = remote_attempt_dir / "job.sbatch"
    script.write_text(render_sbatch(spec), encoding="utf-8")
    result = subprocess.run(["bash", str(script)], capture_output=True, check=False)
    assert result.returncode == REFUSED_EXIT == 85
    assert not witness.exists(), "the command must not run"
    assert not (remote_attempt_dir / EXIT_CODE_FILE).exists()
    assert (remote_attempt_dir / CLAIM_FILE).read_text() == holder, (
        "the holder's claim is untouched"
    )
    assert holder in (remote_attempt_dir / "refused").read_text()


def test_a_claimed_attempt_runs_nothing_under_srun(tmp_path: Path) -> None:
    remote_attempt_dir = tmp_path
    (remote_attempt_dir / CLAIM_FILE).write_text("kind=fence\nby=engine\n")
    witness = remote_attempt_dir / "ran"
    spec = SlurmJobSpec(
        job_name="j",
        command=("touch", str(witness)),
        remote_attempt_dir=PurePosixPath(remote_attempt_dir),
        time_minutes=1,
    )
    argv = srun_argv(spec)
    result = LocalTransport().run(argv[argv.index("bash") :], timeout=10)
    assert result.returncode == 85
    assert not witness.exists()


def test_of_two_wrappers_racing_for_one_attempt_exactly_one_runs(tmp_path: Path) -> None:
    """link(2) decides: started together, eight copies of one attempt run its command once."""
    remote_attempt_dir = tmp_path
    counter = remote_attempt_dir / "counter"
    spec = SlurmJobSpec(
        job_name="race",
        command=("sh", "-c", f"echo ran >> {counter}"),
        remote_attempt_dir=PurePosixPath(remote_attempt_dir),
        time_minutes=1,
    )
    script = remote_attempt_dir / "job.sbatch"
    script.write_text(render_sbatch(spec), encoding="utf-8")
    copies = [subprocess.Popen(["bash", str(script)]) for _ in range(8)]
    codes = sorted(p.wait(timeout=30) for p in copies)
    assert codes == [0] + [REFUSED_EXIT] * 7
    assert counter.read_text() == "ran\n"
