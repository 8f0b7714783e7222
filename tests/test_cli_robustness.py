"""`vibesys run` and the journal commands against what users actually do to them: closed and
broken outputs, a full disk, silly numbers, hostile arguments, unwritable, damaged and
read-only journals. Every case ends in one line and a documented status, never a traceback,
and never with an invocation recorded that nobody drives."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers.cli import vibesys_cli as cli

ROOT = Path(__file__).resolve().parent.parent
VIBESYS = f"{shlex.quote(sys.executable)} -m vibesys"


def shell(script: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("VIBESYS_FAILPOINTS", None)
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, text=True, capture_output=True, timeout=timeout
    )


def listed(cwd: Path) -> list[dict[str, object]]:
    out = cli("journal", "list", "--json", cwd=cwd)
    assert out.returncode == 0, out.stderr
    return list(json.loads(out.stdout)["invocations"])


def one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vibesys: error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_a_closed_stdout_is_refused_before_anything_is_recorded(tmp_path: Path) -> None:
    result = shell(f"exec {VIBESYS} run -- echo hi >&-", tmp_path)
    one_line_error(result, "stdout is closed")
    assert not (tmp_path / ".vibesys").exists(), "nothing written"


@pytest.mark.parametrize(
    ("option", "value", "needle"),
    [
        ("--retry-delay", "nan", "--retry-delay nan"),
        ("--retry-delay", "-1", "between 0"),
        ("--retry-delay", "inf", "--retry-delay inf"),
        ("--max-retries", "99999999999999999999", "--max-retries 99999999999999999999"),
        ("--max-retries", "1.5", "not a whole number"),
        ("--unreachable-timeout", "nan", "--unreachable-timeout"),
    ],
)
def test_silly_numbers_are_refused_before_anything_is_recorded(
    tmp_path: Path, option: str, value: str, needle: str
) -> None:
    one_line_error(cli("run", option, value, "--", "true", cwd=tmp_path), needle)
    assert not (tmp_path / ".vibesys").exists()


def test_an_option_of_another_adapter_is_refused_naming_the_adapter(tmp_path: Path) -> None:
    result = cli("run", "--gpus", "1", "--", "true", cwd=tmp_path)
    one_line_error(result, "--gpus is not an option of the local adapter", "only sbatch and srun")
    assert not (tmp_path / ".vibesys").exists()


def test_a_usage_error_is_one_line_not_a_box(tmp_path: Path) -> None:
    one_line_error(cli("run", "--no-such-option", "--", "true", cwd=tmp_path), "no-such-option")


def test_a_broken_pipe_cancels_the_job_and_settles_it(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    job = f"for i in $(seq 1 200); do echo line $i; echo $i > {counter}; sleep 0.05; done"
    result = shell(
        f"{VIBESYS} run -- sh -c {shlex.quote(job)} | head -1; echo status=${{PIPESTATUS[0]}}",
        tmp_path,
    )
    assert result.stdout.splitlines()[0] == "line 1"
    assert "status=74" in result.stdout, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr
    assert "the output failed" in result.stderr and "was cancelled" in result.stderr
    [inv] = listed(tmp_path)
    assert (inv["state"], inv["outcome"]) == ("DONE", "CANCELLED"), "no driverless invocation"
    assert int(counter.read_text()) < 200, "the job was stopped, not run to its end"


def test_a_full_disk_on_stdout_cancels_the_job(tmp_path: Path) -> None:
    result = shell(f"{VIBESYS} run -- sh -c 'echo hi; sleep 30' > /dev/full", tmp_path)
    assert result.returncode == 74, result.stderr
    assert "Traceback" not in result.stderr
    assert "No space left on device" in result.stderr
    [inv] = listed(tmp_path)
    assert (inv["state"], inv["outcome"]) == ("DONE", "CANCELLED")


def test_journal_show_of_a_byte_that_is_not_text(tmp_path: Path) -> None:
    assert cli("run", "--", "true", cwd=tmp_path).returncode == 0
    result = subprocess.run(
        [sys.executable, "-m", "vibesys", "journal", "show", b"\xff"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    one_line_error(result, "is not an invocation id")


def test_an_unwritable_journal_directory_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = cli("run", "--journal", str(blocker / "sub" / "j.db"), "--", "true", cwd=tmp_path)
    one_line_error(result, "cannot create the journal's directory")


def damaged_journal(tmp_path: Path) -> Path:
    for _ in range(4):
        assert cli("run", "--name", "x" * 200, "--", "true", cwd=tmp_path).returncode == 0
    (tmp_path / "an_id").write_text(str(listed(tmp_path)[0]["id"]))
    path = tmp_path / ".vibesys" / "journal.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    roots = [
        page
        for (page,) in conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name IN ('invocations', 'history')"
        )
    ]
    conn.close()
    with open(path, "r+b") as handle:  # damage the tables' root pages, not the schema
        for page in roots:
            handle.seek((page - 1) * size)
            handle.write(b"\xde\xad\xbe\xef" * (size // 4))
    return path


@pytest.mark.parametrize(
    "command", [["journal", "list"], ["journal", "show", "ID"], ["run", "--", "true"]]
)
def test_a_damaged_journal_is_reported_as_damaged(tmp_path: Path, command: list[str]) -> None:
    path = damaged_journal(tmp_path)
    an_id = (tmp_path / "an_id").read_text()
    result = cli(*[an_id if word == "ID" else word for word in command], cwd=tmp_path)
    assert result.returncode in (1, 2) and "Traceback" not in result.stderr
    assert "damaged journal" in result.stderr and path.name in result.stderr, result.stderr
    assert "not a vibesys journal" not in result.stderr


def test_verify_names_a_damaged_journal(tmp_path: Path) -> None:
    damaged_journal(tmp_path)
    result = cli("journal", "verify", cwd=tmp_path)
    assert result.returncode in (1, 2) and "Traceback" not in result.stderr
    assert "malformed" in result.stderr or "damaged" in result.stderr


def as_nobody(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            sys.executable,
            "-m",
            "vibesys",
            *args,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "HOME": "/nonexistent"},
        timeout=60,
    )


def test_a_read_only_journal_can_be_listed_shown_and_verified(tmp_path: Path) -> None:
    """Run as an unprivileged user, who may read the journal's directory but not write it
    (root would be allowed to write anything)."""
    work = Path(tempfile.mkdtemp(prefix="vibesys-ro-"))  # pytest's own tmp is root-only
    try:
        readonly_checks(work)
    finally:
        shutil.rmtree(work)


def readonly_checks(work: Path) -> None:
    assert cli("run", "--", "true", cwd=work).returncode == 0
    [inv] = listed(work)
    for path in [work, *work.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    listing = as_nobody("journal", "list", cwd=work)
    assert listing.returncode == 0 and str(inv["id"]) in listing.stdout, listing.stderr
    shown = as_nobody("journal", "show", str(inv["id"]), cwd=work)
    assert shown.returncode == 0 and "Collected" in shown.stdout, shown.stderr
    verified = as_nobody("journal", "verify", cwd=work)
    assert verified.returncode == 0 and "journal ok" in verified.stdout, verified.stderr
    refused = as_nobody("run", "--", "true", cwd=work)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "cannot open the journal" in refused.stderr or "readonly" in refused.stderr
