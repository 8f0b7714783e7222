"""The bubblewrap command line: golden files, and the real bwrap confining a command (the
workspace writable, read-only paths read-only, nothing else visible)."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.helpers.golden_files import assert_matches_golden
from vibesys.osutil.sandbox import (
    BWRAP_PRELUDE,
    Sandbox,
    bwrap_options,
    confined_command,
    env_file_bytes,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "bwrap"

CASES = {
    "basic": Sandbox(
        workspace="/shared/ws/cand-a",
        cwd="/shared/ws/cand-a/src",
        env={"PATH": "/usr/bin:/bin", "HOME": "/home/op"},
    ),
    "read_only_nested": Sandbox(
        workspace="/tmp/ws",
        cwd="/tmp/ws",
        read_only_paths=("/home/op/venvs/torch", "/tmp/datasets/imagenet", "/opt/rocm"),
        env={"ODD": "two words; $(id) `x` --", "A": ""},
    ),
}


def render(sandbox: Sandbox) -> str:
    """One option (with its values) per line, then the command."""
    lines, options = [], list(bwrap_options(sandbox))
    takes = {"--ro-bind-try": 2, "--ro-bind": 2, "--bind": 2, "--setenv": 2, "--cap-drop": 1}
    takes |= {"--proc": 1, "--dev": 1, "--tmpfs": 1, "--chdir": 1}
    while options:
        option = options.pop(0)
        values = [options.pop(0) for _ in range(takes.get(option, 0))]
        lines.append(shlex.join([option, *values]))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str) -> None:
    assert_matches_golden(GOLDEN / f"{name}.txt", render(CASES[name]))


def test_the_prelude_is_golden_too() -> None:
    assert_matches_golden(GOLDEN / "prelude.sh", BWRAP_PRELUDE)


def test_the_command_follows_the_counted_options() -> None:
    sandbox = CASES["basic"]
    argv = confined_command(sandbox, ["--weird", "x"])
    options = bwrap_options(sandbox)
    assert argv[:6] == ("bash", "-c", BWRAP_PRELUDE, "vibesys-bwrap", "-", "-")
    assert argv[6] == str(len(options))
    assert argv[7 : 7 + len(options)] == options
    assert argv[7 + len(options) :] == ("--weird", "x")


def test_with_an_env_file_no_value_is_in_the_command_line() -> None:
    sandbox = Sandbox(workspace="/w", cwd="/w", env={"TOKEN": "s3cret", "A": "1"})
    argv = confined_command(sandbox, ["true"], env_file="/runs/x/agent.env")
    assert "s3cret" not in " ".join(argv) and "TOKEN" not in argv
    assert argv[4] == "/runs/x/agent.env"
    assert env_file_bytes(sandbox) == b"A=1\0TOKEN=s3cret\0"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"workspace": "/", "cwd": "/"}, "other than /"),
        ({"workspace": "/w/../x", "cwd": "/x"}, "normalized"),
        ({"workspace": "/w", "cwd": "/v"}, "not inside the workspace"),
        ({"workspace": "/w", "cwd": "/w", "read_only_paths": ("/",)}, "other than /"),
        ({"workspace": "/w/sub", "cwd": "/w/sub", "read_only_paths": ("/w",)}, "lies inside"),
        ({"workspace": "/w", "cwd": "/w", "read_only_paths": ("/w/data",)}, "inside the workspace"),
        ({"workspace": "/usr/local/ws", "cwd": "/usr/local/ws"}, "lies inside /usr"),
        ({"workspace": "/w", "cwd": "/w", "env": {"A=B": "1"}}, "not a usable name"),
        ({"workspace": "/w", "cwd": "/w", "capture_dir": "/w/cap"}, "capture directory"),
        ({"workspace": "/w/c/ws", "cwd": "/w/c/ws", "capture_dir": "/w/c"}, "capture directory"),
        ({"workspace": "/w", "cwd": "/w", "capture_dir": "/tmp/c"}, "capture directory"),
    ],
)
def test_unsafe_sandboxes_cannot_be_built(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Sandbox(**fields)  # type: ignore[arg-type]


# -- the real bwrap ----------------------------------------------------------------------------


def run_confined(sandbox: Sandbox, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        confined_command(sandbox, ["sh", "-c", script]),
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": "1", "SLURM_JOB_ID": "9"},
        check=False,
    )


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    paths = {name: tmp_path / name for name in ("ws", "ro", "other", "home")}
    for path in paths.values():
        path.mkdir()
    (paths["ws"] / "sub").mkdir()
    (paths["ro"] / "tool").write_text("readable")
    (paths["other"] / "secret").write_text("never seen")
    (paths["ws"] / "out").symlink_to(paths["other"] / "secret")
    return paths


def test_a_confined_command_sees_only_what_it_may(layout: dict[str, Path]) -> None:
    ws, ro, other = layout["ws"], layout["ro"], layout["other"]
    sandbox = Sandbox(str(ws), str(ws / "sub"), (str(ro),), {"PATH": "/usr/bin:/bin", "X": "1"})
    done = run_confined(
        sandbox,
        f"""
        pwd
        echo made > {ws}/made && echo wrote-workspace
        cat {ro}/tool; echo
        touch {ro}/new 2>/dev/null || echo ro-is-read-only
        cat {other}/secret 2>/dev/null || echo other-is-invisible
        cat {ws}/out 2>/dev/null || echo symlink-escape-dangles
        touch /usr/new 2>/dev/null || echo usr-is-read-only
        ls /tmp | wc -l
        env | sort
        exit 3
        """,
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout.split("\n") == [
        str(ws / "sub"),
        "wrote-workspace",
        "readable",
        "ro-is-read-only",
        "other-is-invisible",
        "symlink-escape-dangles",
        "usr-is-read-only",
        "1",  # /tmp holds only the mount point leading to the workspace
        "CUDA_VISIBLE_DEVICES=1",  # the node's device variable, copied in
        "PATH=/usr/bin:/bin",
        f"PWD={ws / 'sub'}",
        "X=1",
        "",
    ]
    assert (ws / "made").read_text() == "made\n"
    assert not (ro / "new").exists()


def test_root_in_the_sandbox_holds_no_capabilities(layout: dict[str, Path]) -> None:
    ws = layout["ws"]
    done = run_confined(
        Sandbox(str(ws), str(ws), env={"PATH": "/usr/bin:/bin"}),
        "grep CapEff /proc/self/status; mount -t tmpfs none /mnt 2>/dev/null || echo no-mount",
    )
    assert done.stdout.split() == ["CapEff:", "0000000000000000", "no-mount"]


def test_the_hosts_credential_files_read_as_empty(layout: dict[str, Path]) -> None:
    """Without capabilities root still owns /etc/shadow: the sandbox hides its content."""
    ws = layout["ws"]
    done = run_confined(
        Sandbox(str(ws), str(ws), env={"PATH": "/usr/bin:/bin"}),
        "for f in /etc/shadow /etc/gshadow; do head -c 1 $f 2>/dev/null | wc -c; done",
    )
    assert done.stdout.split() == ["0", "0"], done.stderr
    if os.getuid() == 0 and Path("/etc/shadow").stat().st_size:  # what it hides, here
        assert Path("/etc/shadow").read_bytes()


def test_death_by_signal_is_reported_as_128_plus_n(layout: dict[str, Path]) -> None:
    ws = layout["ws"]
    done = run_confined(Sandbox(str(ws), str(ws), env={"PATH": "/usr/bin:/bin"}), "kill -9 $$")
    assert done.returncode == 137


def test_variables_from_the_env_file_reach_the_command_and_only_it(
    layout: dict[str, Path], tmp_path: Path
) -> None:
    ws = layout["ws"]
    sandbox = Sandbox(
        str(ws), str(ws), env={"PATH": "/usr/bin:/bin", "TOKEN": "a b=c", "MULTI": "x\ny"}
    )
    env_file = tmp_path / "agent.env"
    env_file.write_bytes(env_file_bytes(sandbox))
    argv = confined_command(
        sandbox, ["sh", "-c", 'printf "%s|%s" "$TOKEN" "$MULTI"'], str(env_file)
    )
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "a b=c|x\ny"
    assert "a b=c" not in " ".join(argv)


def test_the_capture_directory_is_the_directory_the_prelude_starts_in(
    layout: dict[str, Path], tmp_path: Path
) -> None:
    """The node's working directory (the job's, known only there) is writable at the capture
    directory, and nothing else of it is: a profiler's capture lands where srun runs it."""
    ws, job = layout["ws"], tmp_path / "job-work"
    job.mkdir()
    sandbox = Sandbox(str(ws), str(ws), (), {"PATH": "/usr/bin:/bin"}, capture_dir="/capture")
    done = subprocess.run(
        confined_command(sandbox, ["sh", "-c", "pwd; echo captured > /capture/profile.txt"]),
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
        cwd=job,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{ws}\n"
    assert (job / "profile.txt").read_text() == "captured\n"
    assert not (ws / "profile.txt").exists()
