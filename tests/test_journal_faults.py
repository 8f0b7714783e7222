"""A journal that fails under a live `vibesys run` says what is true: its own status (73, never
2, the status of bad input with nothing written), one line naming the invocation that may still
be running and the way out, and after that way out (`vibesys reconcile`) the job has run once.

Real faults, as root: a small tmpfs filled mid-run, the journal made immutable mid-run
(`chattr +i`), the journal deleted, and replaced by another file, mid-run (noticed by the
identity check at the next commit). The job waits for `go`, so each fault comes while it runs;
the invocation directory is on another disk (a symbolic link), so only the journal fails.
A creation killed half-way leaves no journal at all."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cli import vibesys_cli

JOURNAL_FAULT = 73
#: Counts its runs, says it started, and ends once told to.
JOB = "echo ran >> {count}; touch {started}; while [ ! -e {go} ]; do sleep 0.05; done; echo done"


class Scene:
    """A journal in `home/.vibesys`, its invocation directories in `runs` (another file system when
    `home` is a tmpfs), and one `vibesys run` of JOB started there."""

    def __init__(self, home: Path, elsewhere: Path) -> None:
        self.home = home
        self.journal = home / ".vibesys" / "journal.db"
        self.journal.parent.mkdir(parents=True)
        runs = elsewhere / "runs"
        runs.mkdir()
        (self.journal.parent / "runs").symlink_to(runs)
        self.count, self.started, self.go = (elsewhere / n for n in ("count", "started", "go"))
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        job = JOB.format(count=self.count, started=self.started, go=self.go)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vibesys", "run", "--", "sh", "-c", job],
            cwd=self.home,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={k: v for k, v in os.environ.items() if k != "VIBESYS_FAILPOINTS"},
        )
        deadline = time.monotonic() + 60
        while not self.started.exists():
            assert self.process.poll() is None, self.process.communicate()
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.05)

    def finish(self) -> tuple[int, str]:
        """Let the job end; the run's status and its stderr."""
        assert self.process is not None
        self.go.touch()
        _, err = self.process.communicate(timeout=60)
        return self.process.returncode, err

    def invocation(self) -> str:
        [row] = json.loads(self.cli("journal", "list", "--json").stdout)["invocations"]
        return str(row["id"])

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return vibesys_cli(*args, cwd=self.home, timeout=120)


def fault_line(status: int, err: str) -> str:
    assert status == JOURNAL_FAULT, (status, err)
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("vibesys: ")]
    assert len(lines) == 1, err
    return lines[0]


def settled_once(scene: Scene) -> None:
    """After the way out: reconcile finds the job ended, the invocation is DONE, it ran once."""
    done = scene.cli("reconcile")
    assert done.returncode == 0, done.stdout + done.stderr
    [row] = json.loads(scene.cli("journal", "list", "--json").stdout)["invocations"]
    assert (row["state"], row["outcome"], row["exit_code"]) == ("DONE", "COMPLETED", 0)
    assert scene.count.read_text() == "ran\n", "the job ran exactly once"
    assert scene.cli("journal", "verify").returncode == 0


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(directory: Path) -> None:
    """Fill the file system (already full, even the filler's creation fails: so be it)."""
    with contextlib.suppress(OSError), open(directory / "filler", "wb") as handle:
        while True:
            handle.write(b"\0" * 65536)
            handle.flush()


def test_a_full_disk_mid_run_is_its_own_status_and_reconcile_settles_it(
    tmpfs: Path, tmp_path: Path
) -> None:
    scene = Scene(tmpfs / "project", tmp_path)
    scene.start()
    fill(tmpfs)
    status, err = scene.finish()
    line = fault_line(status, err)
    invocation = scene.invocation()
    assert "cannot be written: its disk is full" in line, line
    assert f"invocation {invocation} may still be running" in line, line
    assert line.endswith("fix the disk, then run `vibesys reconcile`"), line
    (tmpfs / "filler").unlink()
    settled_once(scene)


def chattr(flag: str, *paths: Path) -> None:
    done = subprocess.run(["chattr", flag, *map(str, paths)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"chattr {flag} is not allowed here: {done.stderr.strip()}")


def test_a_journal_made_immutable_mid_run_is_its_own_status(tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    scene = Scene(tmp_path / "project", tmp_path / "other")
    scene.start()
    files = [scene.journal, scene.journal.with_name("journal.db-wal")]
    chattr("+i", *files)
    try:
        status, err = scene.finish()
    finally:
        chattr("-i", *files)
    line = fault_line(status, err)
    assert "cannot be written: an I/O error" in line, line
    assert f"invocation {scene.invocation()} may still be running: fix the disk" in line
    settled_once(scene)


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_journal_deleted_or_replaced_mid_run_is_noticed_at_the_next_commit(
    tmp_path: Path, how: str
) -> None:
    (tmp_path / "other").mkdir()
    scene = Scene(tmp_path / "project", tmp_path / "other")
    scene.start()
    assert scene.process is not None
    if how == "deleted":
        scene.journal.unlink()
    else:  # another file at the path: a copy of what the journal file held a moment ago
        shutil.copy(scene.journal, scene.journal.with_name("copy.db"))
        os.replace(scene.journal.with_name("copy.db"), scene.journal)
    status, err = scene.finish()
    line = fault_line(status, err)
    saved = scene.journal.with_name(f"journal.db.rescued-{scene.process.pid}")
    assert "was deleted or replaced while in use" in line, line
    shown = f".vibesys/{saved.name}"
    assert f"move {shown} to .vibesys/journal.db, then run `vibesys reconcile`" in line, line
    assert saved.exists()
    assert not scene.journal.with_name("journal.db-wal").exists(), "no stale WAL to replay"
    os.replace(saved, scene.journal)
    settled_once(scene)


def test_a_creation_killed_half_way_leaves_no_journal(tmp_path: Path) -> None:
    """Killed (SIGKILL) after the schema is written, before it is in place: no journal, so
    read commands say there is none (never "not a vibesys journal"), and the next run
    creates it and removes what the dead one left."""
    kill_after_migrating = (
        "import os, signal, sys\n"
        "from vibesys.journal_schema import opening\n"
        "real = opening._migrate\n"
        "def migrate(conn):\n"
        "    real(conn)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "opening._migrate = migrate\n"
        "sys.argv = ['vibesys', 'run', '--', 'true']\n"
        "from vibesys.cli.main import main\n"
        "main()\n"
    )
    killed = subprocess.run(
        [sys.executable, "-c", kill_after_migrating], cwd=tmp_path, capture_output=True
    )
    assert killed.returncode == -signal.SIGKILL
    journal_dir = tmp_path / ".vibesys"
    assert not (journal_dir / "journal.db").exists()
    assert [p.name for p in journal_dir.iterdir() if p.name.startswith(".journal.db.new-")]
    listed = vibesys_cli("journal", "list", cwd=tmp_path)
    assert listed.returncode == 2 and "no journal at" in listed.stderr, listed.stderr
    assert vibesys_cli("run", "--", "true", cwd=tmp_path).returncode == 0
    assert sorted(p.name for p in journal_dir.iterdir()) == ["journal.db", "runs"]
