"""Where a Slurm job runs or ran, read from real squeue and sacct output in the formats the
scheduler asks for (captured on the project's local cluster, tests/data/*/observed_provenance.txt);
the expected values are written out here."""

from __future__ import annotations

from pathlib import Path

import pytest

from vibesys.adapters.slurm.parse import UnparseableOutput, parse_sacct, parse_squeue
from vibesys.adapters.slurm.provenance import provenance

DATA = Path(__file__).resolve().parents[1] / "data"


def squeue_rows() -> dict[str, dict[str, str]]:
    text = (DATA / "squeue" / "observed_provenance.txt").read_text(encoding="utf-8")
    return {row.job_name: provenance(row) for row in parse_squeue(text)}


def sacct_rows() -> dict[str, dict[str, str]]:
    text = (DATA / "sacct" / "observed_provenance.txt").read_text(encoding="utf-8")
    return {row.job_name: provenance(row) for row in parse_sacct(text)}


def test_squeue_says_where_and_when() -> None:
    rows = squeue_rows()
    assert rows["vsky-prov-done"] == {
        "slurm_job_id": "532",
        "partition": "main",
        "nodes": "node1",
        "cpus": "1",
        "gres": "gres:gpu:1",
        "start": "2026-11-30T15:12:43",
        "end": "2026-11-30T15:12:43",
    }
    assert rows["vsky-prov-fail"]["end"] == "2026-11-30T15:12:43"
    assert "gres" not in rows["vsky-prov-fail"]  # N/A: none asked for


def test_squeue_forecasts_and_limits_are_not_provenance() -> None:
    rows = squeue_rows()
    # Running: its %e is the time limit, not an end.
    assert rows["vsky-prov-run"] == {
        "slurm_job_id": "534",
        "partition": "main",
        "nodes": "node1",
        "cpus": "1",
        "start": "2026-11-30T15:12:43",
    }
    # Pending: the start squeue prints is a forecast, and no node is allocated yet.
    assert rows["vsky-prov-later"] == {"slurm_job_id": "539", "partition": "main"}


def test_sacct_says_the_allocated_tres() -> None:
    rows = sacct_rows()
    assert rows["vsky-prov-done"] == {
        "slurm_job_id": "532",
        "partition": "main",
        "nodes": "node1",
        "tres": "billing=1,cpu=1,gres/gpu=1,node=1",
        "start": "2026-11-30T15:12:43",
        "end": "2026-11-30T15:12:43",
    }
    assert rows["vsky-prov-run"]["tres"] == "billing=1,cpu=1,node=1"
    assert "end" not in rows["vsky-prov-run"]  # Unknown while it runs


def test_a_short_line_is_unparseable_in_the_current_formats() -> None:
    with pytest.raises(UnparseableOutput):
        parse_squeue("slurm_load_jobs error: Invalid job id specified\n")
    with pytest.raises(UnparseableOutput):
        parse_sacct("1|x|COMPLETED|0:0|a|b|None\n")
