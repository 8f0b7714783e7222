"""Inputs at the edge of `vibesys`: each is kept exactly or refused in one line with a
documented status, and a refusal creates nothing (no journal, no `/dev/null-journal`).

- a working directory, a label or a journal path that is not UTF-8: refused; a command's
  argument that is not UTF-8: kept byte for byte;
- labels with a newline or an escape sequence: one row each in `journal list`;
- `--journal` naming what is not (and could not become) a regular file;
- an unknown option: answered with the command's real options;
- an interrupt at any moment of start-up: 130 (or the signal's own death before Python
  handles it), never a traceback, and nothing recorded that nobody drives;
- a closed stdout or stderr: one line on the other, status 2, nothing run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.cli import vibesys_cli

VIBESYS = [sys.executable, "-m", "vibesys"]
#: A traceback frame inside the entry point's `main`, which installs the SIGINT handler first.
ENTERED_MAIN = re.compile(rb'vibesys/cli/main\.py", line \d+, in main\n')


def run_bytes(
    *args: str | bytes, cwd: Path | bytes, **kw: object
) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "VIBESYS_FAILPOINTS"}
    return subprocess.run(
        [*VIBESYS, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
        **kw,  # type: ignore[arg-type]
    )


def one_line(done: subprocess.CompletedProcess[bytes], *needles: bytes, status: int = 2) -> None:
    assert done.returncode == status, (done.returncode, done.stderr)
    assert b"Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(b"vibesys: error: "), done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_a_working_directory_that_is_not_utf8_is_refused_in_one_line(tmp_path: Path) -> None:
    odd = os.path.join(os.fsencode(tmp_path), b"caf\xe9")
    os.mkdir(odd)
    done = run_bytes("run", "--", "true", cwd=odd)
    one_line(done, b"the current directory", b"caf\\xe9", b"is not UTF-8")
    assert os.listdir(odd) == []


def test_a_label_that_is_not_utf8_is_refused_in_one_line(tmp_path: Path) -> None:
    one_line(run_bytes("run", "--name", b"lab\xffel", "--", "true", cwd=tmp_path), b"--name")
    assert not (tmp_path / ".vibesys").exists()


def test_an_argument_that_is_not_utf8_is_kept_exactly(tmp_path: Path) -> None:
    done = run_bytes("run", "--", "printf", "%s", b"caf\xe9 \xff", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"caf\xe9 \xff"


def test_labels_with_newlines_and_escapes_stay_on_their_row(tmp_path: Path) -> None:
    for label in ("two\nlines", "red \x1b[31m!", "plain"):
        assert vibesys_cli("run", "--name", label, "--", "true", cwd=tmp_path).returncode == 0
    listed = vibesys_cli("journal", "list", cwd=tmp_path)
    rows = listed.stdout.splitlines()
    assert len(rows) == 4, listed.stdout
    assert "\x1b" not in listed.stdout
    assert any("two\\nlines" in row for row in rows) and any("\\x1b[31m" in row for row in rows)
    [invocation] = [r.split()[0] for r in rows if "two\\nlines" in r]
    shown = vibesys_cli("journal", "show", invocation, cwd=tmp_path).stdout.splitlines()
    assert shown[0] == f"invocation      {invocation}  (two\\nlines)"


@pytest.mark.parametrize(
    ("name", "needle"),
    [  # /dev/null last: a regression shows in the test's own directory first
        ("dangling", b"is a symbolic link to nothing"),
        ("directory", b"is a directory, not a journal file"),
        ("under_a_file", b"is not a directory"),
        ("fifo", b"is a named pipe, not a journal file"),
        ("devnull", b"is a character device, not a journal file"),
    ],
)
@pytest.mark.parametrize("command", ["run", "list"])
def test_a_journal_that_is_not_a_regular_file_is_refused_creating_nothing(
    tmp_path: Path, name: str, needle: bytes, command: str
) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    os.mkfifo(tmp_path / "fifo")
    path = {
        "devnull": os.devnull,
        "directory": str(tmp_path / "dir"),
        "dangling": str(tmp_path / "link"),
        "under_a_file": str(tmp_path / "file" / "sub" / "journal.db"),
        "fifo": str(tmp_path / "fifo"),
    }[name]
    before = sorted(p.name for p in tmp_path.rglob("*"))
    near_devnull = os.path.exists(os.devnull + "-journal")
    argv = ["run", "--journal", path, "--", "true"] if command == "run" else []
    argv = argv or ["journal", "list", "--journal", path]
    one_line(run_bytes(*argv, cwd=tmp_path), needle)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert near_devnull or not os.path.exists(os.devnull + "-journal")


def test_an_unknown_option_is_answered_with_the_real_ones(tmp_path: Path) -> None:
    done = run_bytes("run", "--bogus", "--", "true", cwd=tmp_path)
    one_line(done, b"no such option: --bogus", b"--journal", b"--adapter", b"--max-retries")
    assert b"--gpus" not in done.stderr  # the local adapter's options: no other adapter's
    sbatch = run_bytes("run", "--adapter", "sbatch", "--bogus", "--", "true", cwd=tmp_path)
    one_line(sbatch, b"--adapter sbatch takes", b"--slurm-config", b"--gpus", b"--time")
    listing = run_bytes("journal", "list", "--bogus", cwd=tmp_path)
    one_line(listing, b"vibesys journal list takes --journal, --state, --json, --help")
    one_line(run_bytes("bogus", cwd=tmp_path), b"no such command 'bogus'", b"run, ", b"wait")
    assert not (tmp_path / ".vibesys").exists()


def _jobs_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if marker.encode() in handle.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def test_an_interrupt_at_any_moment_of_start_up_is_130_without_a_traceback(
    tmp_path: Path,
) -> None:
    """A SIGINT that lands before the entry point has installed its handler (the interpreter's
    start, its `site` import, the few imports up to `vibesys.cli.main.main`, whose first
    statement installs it) is CPython's to answer; every other moment is ours."""
    marker = "31.4159"
    ours = 0
    for delay in (0.0, 0.02, 0.05, 0.08, 0.12, 0.16, 0.2, 0.25, 0.3, 0.4, 0.6):
        process = subprocess.Popen(
            [*VIBESYS, "run", "--", "sleep", marker],
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        if b"Traceback" in err and not ENTERED_MAIN.search(err):
            continue  # before the handler: the interpreter's start and the imports up to it
        ours += 1
        assert process.returncode in (130, -signal.SIGINT), (delay, process.returncode, err)
        assert b"Traceback" not in err and len(err.splitlines()) <= 1, (delay, err)
    assert ours >= 7, "most interrupts should land in vibesys's own start-up"
    listed = vibesys_cli("journal", "list", "--json", cwd=tmp_path)
    rows = json.loads(listed.stdout)["invocations"] if listed.returncode == 0 else []
    assert all((r["state"], r["outcome"]) == ("DONE", "CANCELLED") for r in rows), rows
    deadline = time.monotonic() + 10
    while _jobs_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _jobs_with(marker) == [], "a cancelled job still runs"


_SPY = """
import sys
import signal
import vibesys.cli.interrupts as interrupts
import vibesys.cli.main as entry
import vibesys.cli.run_command as run_command

def spy(values):
    print(signal.getsignal(signal.SIGINT) is interrupts.interrupted_while_starting, flush=True)
    return 0

run_command.execute_run = spy
sys.argv = ["vibesys", "run", "--", "true"]
entry.main()
"""


def test_until_run_takes_its_interrupts_over_a_sigint_exits_and_raises_nothing(
    tmp_path: Path,
) -> None:
    """A KeyboardInterrupt raised in the middle of an import can land in a weakref callback,
    where CPython prints and drops it: the run went on and its job ran to exit 0. So up to
    `run`'s own handler (`interruptible`) SIGINT's handler must be the one that exits."""
    done = subprocess.run(
        [sys.executable, "-c", _SPY], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, "True\n"), done.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("redirect", "where", "needle"),
    [(">&-", "stderr", "stdout is closed"), ("2>&-", "stdout", "stderr is closed")],
)
def test_a_closed_output_is_one_line_on_the_other_and_nothing_runs(
    tmp_path: Path, redirect: str, where: str, needle: str
) -> None:
    command = " ".join([*VIBESYS, "run", "--", "touch", "ran", redirect])
    done = subprocess.run(
        ["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    text = done.stderr if where == "stderr" else done.stdout
    assert text.splitlines() == [f"vibesys: error: {needle}; vibesys needs it for its output"]
    assert sorted(os.listdir(tmp_path)) == [], "nothing ran, nothing was recorded"
    both = subprocess.run(["bash", "-c", f"{command} 2>&-"], cwd=tmp_path, timeout=60)
    assert both.returncode == 2 and os.listdir(tmp_path) == []
