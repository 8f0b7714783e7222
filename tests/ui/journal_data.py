"""A journal for the UI's fast tests, written through the Journal's own methods: a finished
local run with output (markup, a non-ASCII character and an invalid byte in it) and an
artifact, a Slurm run retried after a node failure and a fence whose second attempt waits in
the queue, a SkyPilot run on a cluster lease, a PREPARED one, and a GPU broker command."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from vibesys.journal_schema import ArtifactState, Invocation, Journal, Settings, open_journal
from vibesys.states import (
    Collected,
    Event,
    FailureClass,
    FenceIntended,
    Finished,
    InfraFailed,
    Outcome,
    OutcomeUnknown,
    SubmitDispatched,
    SubmitIntended,
    Submitted,
)

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
#: What the finished run printed, byte for byte.
STDOUT = b"<b>bold?</b> & caf\xc3\xa9 \xff end\n"
STDERR = b"warning: <script>alert(1)</script>\n"


@dataclass(frozen=True)
class Ids:
    done: str
    retried: str
    sky: str
    prepared: str
    broker: str


def _commit(journal: Journal, inv: Invocation, events: list[Event], start: int) -> Invocation:
    for offset, event in enumerate(events):
        inv, _ = journal.commit_transition(inv, event, now=T0 + timedelta(seconds=start + offset))
    return inv


def _new(journal: Journal, root: Path, invocation_id: str, **fields: object) -> Invocation:
    values: dict[str, object] = {
        "adapter": "local",
        "command": ["python", "-c", "print('hi')"],
        "request": {},
        "label": None,
        "max_retries": 2,
        "invocation_dir": str(root / "runs" / invocation_id),
        "now": T0,
    }
    values.update(fields)
    return journal.create_invocation(invocation_id=invocation_id, **values)  # type: ignore[arg-type]


def _run(attempt: int, invocation_id: str, job: str) -> list[Event]:
    name = f"vibesys-{invocation_id}-{attempt}"
    return [SubmitIntended(attempt, name), SubmitDispatched(attempt, name), Submitted(job, "ok")]


def build(path: Path) -> Ids:
    root = path.parent
    journal = open_journal(path)
    try:
        ids = Ids(
            "1a0000000000aaaa",
            "1a0000000000bbbb",
            "1a0000000000cccc",
            "1a0000000000dddd",
            "1a0000000000eeee",
        )
        done = _new(journal, root, ids.done, label="smoke <b>", request={"artifacts": ["*.json"]})
        _commit(
            journal,
            done,
            [
                *_run(1, ids.done, "4242"),
                Finished(FailureClass.COMPLETED, 0, "marker exit_code=0"),
                Collected(Outcome.COMPLETED, 0, "logs in"),
            ],
            1,
        )
        logs = Path(done.invocation_dir) / "1"
        logs.mkdir(parents=True)
        (logs / "stdout").write_bytes(STDOUT)
        (logs / "stderr").write_bytes(STDERR)
        journal.progress.record_artifact(
            ids.done, 1, "result.json", ArtifactState.VERIFIED, size=1234, sha256="ab" * 32
        )

        retried = _new(
            journal,
            root,
            ids.retried,
            adapter="sbatch",
            label="bench",
            request={"site_config": "slurm.toml", "gpus": 1, "partitions": ["main"]},
        )
        retried = _commit(
            journal,
            retried,
            [
                *_run(1, ids.retried, "71"),
                OutcomeUnknown("squeue: no such job"),
                FenceIntended(1),
                InfraFailed(FailureClass.NODE_FAILED, "node1 down", "2030-01-01T12:00:30+00:00"),
                *_run(2, ids.retried, "72"),
            ],
            10,
        )
        journal.invocations.record_attempt_detail(
            ids.retried,
            1,
            claim="kind=fence by=test",
            provenance={"site": "local", "partition": "main", "nodes": "node1"},
        )
        journal.conn.execute(
            "INSERT INTO poll_watch (site, invocation_id, attempt, version, round, seen, "
            "observed_at) VALUES (?,?,?,?,?,?,?)",
            (
                "local-site",
                ids.retried,
                2,
                retried.version,
                3,
                json.dumps({"sight": "queued", "evidence": "PENDING", "reason": "Resources"}),
                (T0 + timedelta(seconds=40)).isoformat(),
            ),
        )

        sky = _new(
            journal,
            root,
            ids.sky,
            adapter="skypilot",
            request={"run_id": "campaign-7", "profile": "site-gpu"},
        )
        _commit(journal, sky, _run(1, ids.sky, "3"), 50)
        lease = journal.clusters.intend_launch(
            name="vibesys-campaign-7-1a2b3c4d",
            campaign="campaign-7",
            fingerprint="1a2b3c4d",
            profile="site-gpu",
            adapter="skypilot",
            request={"run_id": "campaign-7"},
            reason="first use",
            owner="host:1:1",
            now=T0,
        )
        journal.clusters.record_launched(lease.id, ["981"], "sky launch: up", now=T0)
        journal.clusters.record_lease_use(lease.id, ids.sky, 1, now=T0)

        _new(journal, root, ids.prepared, label="waiting")
        broker = _new(journal, root, ids.broker, adapter="srun", label="vibesys-gpu")
        _commit(journal, broker, _run(1, ids.broker, "99"), 60)
        # A recorded column shows up on the page as it was recorded.
        journal.conn.execute(
            "UPDATE invocations SET settings=? WHERE id=?",
            (Settings(retry_delay_seconds=25.0).dumps(), ids.done),
        )
        return ids
    finally:
        journal.close()
