"""An observation is read only while fresh: never older than a round, never for another
version of the invocation (a round that overlaps a commit stays stale), and it round-trips
through the journal, old records included."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.engine.shared_poll.conftest import (
    SITE,
    Clock,
    SharedFake,
    engine,
    make_due,
    running,
    take_lease,
)
from vibesys.adapters.base import JobRef, RemoteStatus
from vibesys.engine.seen import Sight
from vibesys.journal_schema import Journal
from vibesys.journal_schema.codec import decode_record, encode_record
from vibesys.states import CancelRequested


def test_observations_older_than_a_round_are_never_read_as_fresh(
    journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    inv = running(a, tmp_path)
    clock.advance(5)
    make_due(journal, clock)
    assert a.observe(journal.invocations.get(inv.id)) is not None
    # The same round is never handed out twice.
    assert a.observe(journal.invocations.get(inv.id)) is None
    # A commit after the round: its observation was taken for the version before, so it is
    # not fresh for the new one, even for a process that never read it.
    moved = a.commit(journal.invocations.get(inv.id), CancelRequested(by="test"))
    fresh_process = engine(journal, fake, clock, "elsewhere:3:1")
    assert fresh_process.observe(moved) is None
    observation = journal.polls.observation(SITE, inv.id)
    assert observation is not None and observation.version == moved.version - 1


def test_a_round_that_overlaps_a_commit_stays_stale(
    journal: Journal, second_journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    b = engine(second_journal, fake, clock, "elsewhere:2:1")
    inv = running(a, tmp_path)
    make_due(journal, clock)
    assert (
        b.observe(second_journal.invocations.get(inv.id)) is not None
    )  # b ran and read a first round
    clock.advance(5)
    make_due(journal, clock)
    real_status = fake.status

    def status_while_a_commits(jobs: Sequence[JobRef]) -> dict[str, RemoteStatus]:
        # The driver commits while the poller waits for the scheduler's answer.
        a.commit(journal.invocations.get(inv.id), CancelRequested(by="test"))
        return real_status(jobs)

    fake.status = status_while_a_commits  # type: ignore[method-assign]
    assert b.shared.observe_now([second_journal.invocations.get(inv.id)], fake) is not None
    fake.status = real_status  # type: ignore[method-assign]
    site = journal.polls.poll_site(SITE)
    assert site is not None and site.round == 2
    # b's round read version v before the commit made v+1: a's driver must not take it.
    assert a.observe(journal.invocations.get(inv.id)) is None


@pytest.mark.parametrize(
    "sight",
    [Sight.QUEUED, Sight.RUNNING, Sight.ENDED, Sight.UNREACHABLE, Sight.BLOCKED],
)
def test_observations_round_trip_through_the_journal(sight: Sight) -> None:
    from vibesys.engine.seen import Seen
    from vibesys.states import FailureClass

    seen = Seen(
        sight,
        "squeue: 5|x|PENDING|Priority|main|N/A|",
        "5",
        FailureClass.APPLICATION_FAILED if sight is Sight.ENDED else None,
        3 if sight is Sight.ENDED else None,
        "fix it" if sight is Sight.BLOCKED else "",
        sight is Sight.ENDED,
        datetime(2030, 1, 1, tzinfo=UTC) if sight is Sight.UNREACHABLE else None,
        "Priority",
        "main",
        None,
    )
    assert decode_record(Seen, encode_record(seen)) == seen


def test_an_observation_recorded_before_the_codec_still_reads() -> None:
    # The JSON object of every field, in field order, as rounds wrote it before.
    from vibesys.engine.seen import Seen
    from vibesys.states import FailureClass

    old = (
        '{"sight": "ended", "evidence": "sacct: 5|FAILED|3:0", "job_id": "5", '
        '"failure_class": "APPLICATION_FAILED", "exit_code": 3, "fix": "", "final": true, '
        '"since": "2030-01-01T00:00:00.000000+00:00", "reason": null, "partition": "main", '
        '"nodes": null}'
    )
    seen = decode_record(Seen, old)
    assert seen == Seen(
        Sight.ENDED,
        "sacct: 5|FAILED|3:0",
        "5",
        FailureClass.APPLICATION_FAILED,
        3,
        "",
        True,
        datetime(2030, 1, 1, tzinfo=UTC),
        None,
        "main",
        None,
    )


def test_an_observation_is_stale_once_the_next_round_is_due(
    journal: Journal, second_journal: Journal, fake: SharedFake, clock: Clock, tmp_path: Path
) -> None:
    a = engine(journal, fake, clock, "elsewhere:1:1")
    inv = running(a, tmp_path)
    make_due(journal, clock)
    assert a.observe(journal.invocations.get(inv.id)) is not None  # round 1
    # Much later, another process arrives while someone else runs the overdue round: round
    # 1 is older than a round by now, and it must wait for the new one.
    clock.advance(600)
    take_lease(journal, "another-host:77:1", clock)
    late = engine(second_journal, fake, clock, "elsewhere:2:1")
    assert late.observe(second_journal.invocations.get(inv.id)) is None
    observation = journal.polls.observation(SITE, inv.id)
    assert observation is not None and observation.round == 1
