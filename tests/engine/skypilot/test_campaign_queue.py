"""One SkyPilot evaluation at a time per campaign: the others wait in the journal's order
(whichever process drives them), other campaigns are not held up, and one in no queue is still
refused on a busy campaign."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from tests.engine.skypilot.conftest import engine_on, run
from tests.helpers.skyfake import FakeSky
from vibesys.engine import DriveOptions, Engine, drive
from vibesys.journal_schema import Invocation, verify_journal
from vibesys.states import JobState, Outcome


def running_until(engine: Engine, fake: FakeSky, gate: Path, tmp_path: Path) -> Invocation:
    """A campaign's evaluation, left running (detached) until `gate` exists."""
    first = engine.prepare(
        adapter="skypilot",
        command=["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.1; done"],
        request=fake.request(),
        run_root=tmp_path / "runs",
    )
    return drive(engine, first, DriveOptions(detach=True))


def test_one_evaluation_at_a_time_per_campaign_the_others_wait_in_order(
    fake: FakeSky, tmp_path: Path
) -> None:
    engine = engine_on(fake, tmp_path)
    gate = tmp_path / "gate"
    first = running_until(engine, fake, gate, tmp_path)
    assert first.state is JobState.RUNNING
    # Another campaign is not held up; the same campaign is, whatever the resources.
    other = run(engine, fake.request(run_id="campaign-2"), ["true"], tmp_path)
    assert other.outcome is Outcome.COMPLETED
    second, third = (
        engine.prepare(
            adapter="skypilot",
            command=["sh", "-c", f"echo {name}"],
            request=fake.request(resources={"nodes": 2}),
            run_root=tmp_path / "runs",
        )
        for name in ("second", "third")
    )
    for waiting in (second, third):
        engine.journal.leases.release_lease(waiting.id, engine.owner)
    assert engine.advance(second).state is JobState.PREPARED  # waits: nothing is sent
    assert f"1 ahead ({first.id} first" in engine.waiting[second.id]
    assert len(fake.calls("exec")) == 2  # the first and the other campaign's: nothing more
    # The order is the journal's: a process that starts now sees the same queue.
    restarted = engine_on(fake, tmp_path, owner="host:2:2")
    assert restarted.journal.queue.queue_place(third.id).ahead == (first.id, second.id)  # type: ignore[union-attr]
    assert set(restarted.journal.queue.waiting()) == {second.id, third.id}

    told: list[str] = []
    results: dict[str, Invocation] = {}

    def carry_on(owner: str, inv: Invocation) -> None:
        engine = engine_on(fake, tmp_path, owner)
        assert engine.journal.leases.acquire_lease(inv.id, engine.owner, engine.lease_ttl)
        results[inv.id] = drive(engine, inv, DriveOptions(on_wait=told.append))

    waiters = [
        threading.Thread(target=carry_on, args=(f"h:{n}:{n}", inv))
        for n, inv in ((3, third), (4, second))
    ]
    for waiter in waiters:
        waiter.start()
    time.sleep(1.5)
    assert len(fake.calls("exec")) == 2 and told  # both still wait, and were told why
    gate.touch()
    assert drive(engine, first, DriveOptions()).outcome is Outcome.COMPLETED
    for waiter in waiters:
        waiter.join(timeout=30)
    assert results[second.id].outcome is Outcome.COMPLETED
    assert results[third.id].outcome is Outcome.COMPLETED
    # In order: the second's attempt was submitted before the third's, after the first ended.
    started = {
        inv.id: engine.journal.invocations.attempts(inv.id)[0].submitted_at
        for inv in (first, second, third)
    }
    assert started[first.id] < started[second.id] < started[third.id]
    assert engine.journal.invocations.history(first.id)[-1].at <= started[second.id]
    assert verify_journal(engine.journal) == []


def test_an_invocation_in_no_queue_is_still_refused_on_a_busy_campaign(
    fake: FakeSky, tmp_path: Path
) -> None:
    """One recorded before the queue existed: the lease's own check still keeps it off a
    cluster another evaluation runs on (REJECTED, nothing sent)."""
    engine = engine_on(fake, tmp_path)
    gate = tmp_path / "gate"
    first = running_until(engine, fake, gate, tmp_path)
    legacy = engine.prepare(
        adapter="skypilot", command=["true"], request=fake.request(), run_root=tmp_path / "runs"
    )
    engine.journal.conn.execute("DELETE FROM campaign_queue WHERE invocation_id=?", (legacy.id,))
    refused = drive(engine, legacy, DriveOptions())
    assert (refused.state, refused.outcome) == (JobState.DONE, Outcome.REJECTED)
    history = json.dumps([row.evidence for row in engine.journal.invocations.history(refused.id)])
    assert f"campaign campaign-1 is busy with invocation(s) {first.id}" in history
    assert engine.journal.clusters.leases_used_by(refused.id) == []
    gate.touch()
    assert drive(engine, first, DriveOptions()).outcome is Outcome.COMPLETED
