"""The one remote command of an sbatch submission (`_SUBMIT`): a snapshot that is not staged is
said in its own words (nothing was submitted); any other status, 100 and more included, is
sbatch's answer and may mean a job was queued."""

from __future__ import annotations

import subprocess
from pathlib import Path

from vibesys.adapters.slurm.sbatch import _SUBMIT, PROBE_BASE, _probe_said


def submit(tmp_path: Path, probe_status: int, sbatch_status: int) -> tuple[int, str]:
    python = tmp_path / "python"  # stands in for the probe's interpreter
    python.write_text(f"#!/bin/sh\nexit {probe_status}\n")
    python.chmod(0o755)
    done = subprocess.run(
        ["sh", "-c", _SUBMIT, "vibesys-submit", str(tmp_path / "work"),
         str(tmp_path / "work" / "job.sh"), str(python), "verify", "/snap", "d1g3st",
         "", "", "",  # no time asked: no limits check
         "sh", "-c", f"echo queued >&2; exit {sbatch_status}"],
        input="#!/bin/sh\n", capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    return done.returncode, done.stderr


def test_a_snapshot_not_staged_is_said_and_nothing_is_submitted(tmp_path: Path) -> None:
    code, err = submit(tmp_path, probe_status=3, sbatch_status=0)
    assert code == PROBE_BASE + 3 and _probe_said(err)
    assert "queued" not in err and not (tmp_path / "work" / "job.sh").exists()


def test_sbatch_killed_with_a_high_status_is_never_read_as_the_probe(tmp_path: Path) -> None:
    code, err = submit(tmp_path, probe_status=0, sbatch_status=137)
    assert code == 137 and code >= PROBE_BASE
    assert not _probe_said(err)  # sbatch ran: a job may be queued
    assert (tmp_path / "work" / "job.sh").read_text() == "#!/bin/sh\n"
