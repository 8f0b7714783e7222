"""Bytes are bytes: what `vibesys run`, `vibesys wait` and `vibesys logs` write on stdout and
stderr is exactly what the job wrote (random binary, Latin-1, a UTF-8 character cut at the
end), into a pipe; only our own lines (the summary on stderr) are added after it."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

#: Random bytes on stdout (every byte value, invalid UTF-8 everywhere) and Latin-1 text with
#: a UTF-8 character cut in half at its very end on stderr.
JOB = (
    "import os, random, sys\n"
    "out = random.Random(21).randbytes(300_000) + bytes(range(256))\n"
    "err = 'caf\\xe9 na\\xefve \\xa9 \\xff\\n'.encode('latin-1') * 500 + b'end \\xe2\\x82'\n"
    "for i in range(0, len(out), 7_000):\n"
    "    os.write(1, out[i:i + 7_000])\n"
    "os.write(2, err)\n"
)


def expected() -> tuple[bytes, bytes]:
    out = random.Random(21).randbytes(300_000) + bytes(range(256))
    err = "caf\xe9 na\xefve \xa9 \xff\n".encode("latin-1") * 500 + b"end \xe2\x82"
    return out, err


def vibesys(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "VIBESYS_FAILPOINTS"}
    return subprocess.run(
        [sys.executable, "-m", "vibesys", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def summary_after(stderr: bytes, job_stderr: bytes) -> bytes:
    """The job's stderr, byte for byte, then only our own summary line."""
    assert stderr.startswith(job_stderr), stderr[len(job_stderr) - 40 : len(job_stderr) + 80]
    rest = stderr[len(job_stderr) :]
    assert rest.startswith(b"vibesys: ") and rest.count(b"\n") == 1, rest
    return rest


Ran = tuple[Path, subprocess.CompletedProcess[bytes]]


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Ran:
    project = tmp_path_factory.mktemp("bytes")
    (project / "job.py").write_text(JOB)
    return project, vibesys("run", "--", sys.executable, "job.py", cwd=project)


def test_run_writes_the_jobs_bytes_unchanged(ran: Ran) -> None:
    _, done = ran
    out, err = expected()
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout == out
    assert b"DONE COMPLETED" in summary_after(done.stderr, err)


def test_logs_writes_the_jobs_bytes_unchanged(ran: Ran) -> None:
    project, done = ran
    invocation = done.stderr.rsplit(b"vibesys: ", 1)[1].split()[0].decode()
    shown = vibesys("logs", invocation, cwd=project)
    assert shown.returncode == 0
    assert (shown.stdout, shown.stderr) == expected()


def test_wait_writes_the_jobs_bytes_unchanged(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(JOB)
    detached = vibesys("run", "--detach", "--", sys.executable, "job.py", cwd=tmp_path)
    assert detached.returncode == 0, detached.stderr
    invocation = detached.stdout.split()[0].decode()
    waited = vibesys("wait", invocation, cwd=tmp_path)
    out, err = expected()
    assert waited.returncode == 0, waited.stderr[-500:]
    assert waited.stdout == out
    assert b"DONE COMPLETED" in summary_after(waited.stderr, err)
