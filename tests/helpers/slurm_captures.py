"""The captured Slurm 22.05 output (tests/data/*) the parse and classification tests read,
the formats the older captures were made with, and classify() with its defaults."""

from __future__ import annotations

from pathlib import Path

from vibesys.adapters.base import RemoteStatus
from vibesys.adapters.slurm.parse import SACCT_FIELDS, SacctRow, SqueueRow, classify, parse_sacct

DATA = Path(__file__).resolve().parents[1] / "data"


def data(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


#: The formats the older captures were made with (before the provenance fields were added).
OLD_SACCT = SACCT_FIELDS[:7]
OLD_SQUEUE = "%i|%j|%T|%r|%P|%b"
#: The captures of a waiting job's reason: with the nodes, without the times.
SQUEUE_WITH_NODES = "%i|%j|%T|%r|%P|%b|%N"


def sacct_by_id(name: str, fields: tuple[str, ...] = OLD_SACCT) -> dict[str, SacctRow]:
    return {row.job_id: row for row in parse_sacct(data(name), fields)}


VERIFIED = sacct_by_id("sacct/verified_doc_states.txt", SACCT_FIELDS[:6])
OBSERVED = sacct_by_id("sacct/observed_with_reason.txt")
EDGES = sacct_by_id("sacct/constructed_edge_cases.txt")


def status(
    row: SacctRow | SqueueRow, marker: int | None = None, ours: bool = False
) -> RemoteStatus:
    return classify(row, marker, ours)
