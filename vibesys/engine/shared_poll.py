"""One poll budget per host and site: every vibesys process on this host that watches jobs of
one scheduler (`run`, `wait`, `reconcile`, `logs --follow`) shares one batched status round
per interval, through the journal.

A process that needs a fresh view of an invocation registers it as watched at its site
(`poll_watch`). When the site's next round is due and no live process holds the site's poller
lease (`poll_sites`), it takes the lease, asks the adapter once for every watched invocation
that needs an observation (the adapter's batched `status`: one squeue, and sacct only for the
jobs squeue forgot), stores each observation with the round number and the (attempt, version)
of the row it was taken for, and releases the lease. The others read what it stored.

Freshness is what keeps the planner's decisions sound: an observation is handed to a driver
only for the same attempt and the same version of the row (so it was made after the driver's
last commit: the poller read that version before it asked the scheduler) and only from a round
the driver has not read yet. A driver that just committed waits for the next round.

The schedule (`adapters.base.PollSchedule`): the next round is due `interval(age)` after the
last one, `age` being the youngest watched job's; never sooner than the floor after the last
round started (the floor follows the site's RPC rate limit, read once per site by the poller
and kept in the journal). Between rounds the poller lease also serves a cheap probe of the
watched jobs' exit markers (no scheduler call): a job that ended makes the next round due a
short `settle` later while other watched jobs still run (at once when none does; never
sooner than the floor), each further end found puts it off `settle` again, up to
`settle_max` after the first, so that one round confirms the jobs of a batch that end one
after another, and a short job's end is seen within about a second.

The observations are the same `Seen` values the planner reads from a direct status call,
stored and read back typed with the journal's event codec (`encode_record`, `decode_record`);
the planner does not know whether a round was shared.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from msgspec import Struct, field

from vibesys.adapters.base import PollSchedule, SharedPolling
from vibesys.engine.observation import seen_of
from vibesys.engine.observe import seen_error
from vibesys.engine.plan import needs_observation
from vibesys.engine.records import record_probe, record_round, record_site_facts
from vibesys.engine.seen import ProbeSeen, RoundSeen, Seen, Sight
from vibesys.errors import BackendError
from vibesys.journal_schema import Invocation
from vibesys.journal_schema.codec import decode_record, encode_record
from vibesys.journal_schema.polls import Observation, Observed, PollSite, Settle, poller_free

if TYPE_CHECKING:
    from vibesys.engine.core import Engine


#: How long a poller lease lasts. A holder on this host is judged by its liveness (pid and
#: start time), so a dead poller's lease passes on at once; the expiry only bounds a holder
#: whose liveness cannot be checked.
POLLER_TTL = timedelta(seconds=120)
#: How often a process waiting for someone else's round looks whether it is done.
ROUND_CHECK_SECONDS = 0.05
#: How long `observe_now` (reconcile) waits for a round held by another process.
FORCED_ROUND_WAIT_SECONDS = 180.0

#: Threads of one process (a client's handles, the bridge's evaluations) share its identity,
#: which the poller lease cannot tell apart: a lock per site lets one of them take the turn,
#: and the others read its round.
_TURNS: dict[str, threading.Lock] = {}
_TURNS_GUARD = threading.Lock()


def _turn(site: str) -> threading.Lock:
    with _TURNS_GUARD:
        return _TURNS.setdefault(site, threading.Lock())


class SharedPoll(Struct):
    """This process's side of the shared rounds (one per engine)."""

    engine: Engine
    #: per invocation, the last round whose observation this process handed out
    consumed: dict[str, int] = field(default_factory=dict)
    #: rounds this process ran, and probes (for people and tests)
    rounds_run: int = 0
    probes_run: int = 0
    #: (invocation, version) pairs this process registered as watched
    _watching: set[tuple[str, int]] = field(default_factory=set)

    # -- what drivers call ------------------------------------------------------------------

    def observe(self, inv: Invocation, backend: SharedPolling) -> Seen | None:
        """A fresh observation of `inv`'s attempt, running the site's round or probe when it is
        this process's turn; None when there is none yet (look again after `pause`)."""
        site = backend.poll_site()
        self._watch(site, [inv], backend)
        self._work(site, backend, self.engine.journal.polls.poll_site(site))
        return self._fresh(site, inv)

    def observe_now(
        self, invocations: Sequence[Invocation], backend: SharedPolling
    ) -> dict[str, Seen]:
        """Fresh observations of all `invocations` (reconcile): a round including them is run
        as soon as the floor allows, or awaited when another process runs one."""
        journal = self.engine.journal
        site = backend.poll_site()
        journal.polls.watch(site, [inv.id for inv in invocations])  # a round at once: no hold
        found: dict[str, Seen] = {}
        asked = self.engine.clock()
        deadline = time.monotonic() + FORCED_ROUND_WAIT_SECONDS
        while True:
            for inv in invocations:
                if inv.id not in found and (seen := self._fresh(site, inv, asked)) is not None:
                    found[inv.id] = seen
            if len(found) == len(invocations):
                return found
            if time.monotonic() > deadline:
                missing = [inv for inv in invocations if inv.id not in found]
                found.update(self._direct(missing, backend))
                return found
            row = journal.polls.poll_site(site)
            assert row is not None
            schedule = self._schedule(backend, row)
            earliest = _after(row.started_at, schedule.floor)
            now = self.engine.clock()
            if earliest is not None and earliest > now:
                time.sleep(min((earliest - now).total_seconds(), 1.0))
                continue
            if not self._round(site, backend, row, force=True):
                time.sleep(ROUND_CHECK_SECONDS)

    def pause(self, inv: Invocation, backend: SharedPolling) -> float:
        """Seconds until this process may have something new for `inv`: the next round, the
        next probe, or (a round under way elsewhere) a short look."""
        row = self.engine.journal.polls.poll_site(backend.poll_site())
        if row is None:
            return ROUND_CHECK_SECONDS
        now = self.engine.clock()
        if self._held_by_other(row, now):
            return ROUND_CHECK_SECONDS
        schedule = self._schedule(backend, row)
        moments = [
            row.next_due() or now,
            _after(row.probed_at, schedule.probe) or now,
        ]
        wait = (min(moments) - now).total_seconds()
        return min(max(wait, 0.02), 1.0)

    def hurry(self, inv: Invocation, backend: SharedPolling) -> None:
        """Make the site's next round due as soon as the floor allows (a cancel was sent:
        its effect is worth seeing soon, and a cancelled job may leave no marker to probe)."""
        site = backend.poll_site()
        row = self.engine.journal.polls.poll_site(site)
        if row is None:
            return
        schedule = self._schedule(backend, row)
        soon = _after(row.started_at, schedule.floor) or self.engine.clock()
        due = row.next_due()
        if due is None or due > soon:
            self.engine.journal.polls.advance_due(site, soon)

    # -- the turn of this process -----------------------------------------------------------

    def _watch(self, site: str, invocations: Sequence[Invocation], backend: SharedPolling) -> None:
        # A round forgets an invocation that needs no observation (RETRYING, COLLECTING): a
        # new version may need watching again, so registration is per version.
        if all((inv.id, inv.version) in self._watching for inv in invocations):
            return
        now = self.engine.clock()
        initial = backend.poll_schedule({}).initial
        self.engine.journal.polls.watch(
            site, [inv.id for inv in invocations], now=now, hold_until=now + _seconds(initial)
        )
        self._watching.update((inv.id, inv.version) for inv in invocations)

    def _fresh(self, site: str, inv: Invocation, asked: datetime | None = None) -> Seen | None:
        """The site's observation of `inv` if it is fresh for this process: taken for its
        current attempt and version, from a round this process has not read, that is still
        the latest one the schedule allows (once the next round is due, it is stale), and, for
        `asked`, made since then."""
        journal = self.engine.journal
        seen = journal.polls.observation(site, inv.id)
        if seen is None or (seen.attempt, seen.version) != (inv.attempt, inv.version):
            return None
        if seen.round <= self.consumed.get(inv.id, 0):
            return None  # already handed out: a new round is needed
        if asked is not None and seen.observed_at < asked:
            return None
        row = journal.polls.poll_site(site)
        if row is None or row.round != seen.round:
            return None
        due = row.next_due()
        if due is not None and due <= self.engine.clock() and row.poller != self.engine.owner:
            return None  # a newer round is due: this one is older than a round
        self.consumed[inv.id] = seen.round
        return decode_record(Seen, seen.seen)

    def _work(self, site: str, backend: SharedPolling, row: PollSite | None) -> None:
        if row is None:
            return
        turn = _turn(site)
        if not turn.acquire(blocking=False):
            return  # another thread of this process takes the turn
        try:
            self._take_turn(site, backend, row)
        finally:
            turn.release()

    def _take_turn(self, site: str, backend: SharedPolling, row: PollSite) -> None:
        now = self.engine.clock()
        if self._held_by_other(row, now):
            return
        schedule = self._schedule(backend, row)
        due = row.next_due()
        if due is None or due <= now:
            self._round(site, backend, row)
            return
        probed = _after(row.probed_at, schedule.probe)
        if probed is None or probed <= now:
            self._probe(site, backend, row, schedule)

    def _round(
        self, site: str, backend: SharedPolling, row: PollSite, *, force: bool = False
    ) -> bool:
        """Run the site's next round if this process gets the lease; whether it did."""
        journal, engine = self.engine.journal, self.engine
        taken = journal.polls.take_poller(
            site,
            engine.owner,
            POLLER_TTL,
            engine.clock(),
            after_round=row.round,
            force=force,
        )
        if taken is None:
            return False
        try:
            facts = taken.facts
            if facts is None:
                facts = self._read_facts(site, backend)
            schedule = backend.poll_schedule(facts or {})
            started = engine.clock()
            watched = journal.polls.watched(site)
            need = [inv for inv in watched if needs_observation(inv)]
            observed = self._status(need, backend)
            now = engine.clock()
            ages = [(now - inv.updated_at).total_seconds() for inv in need]
            interval = schedule.interval(min(ages, default=schedule.maximum))
            due = max(now + timedelta(seconds=interval), started + _seconds(schedule.floor))
            seen = RoundSeen(
                now,
                due,
                [
                    Observed(inv.id, inv.attempt, inv.version, encode_record(observed[inv.id]))
                    for inv in need
                ],
                [inv.id for inv in watched if not needs_observation(inv)],
            )
            done = record_round(journal, site, engine.owner, seen)
        except BaseException:
            journal.polls.release_poller(site, engine.owner)
            raise
        if done is not None:
            self.rounds_run += 1
        return done is not None

    def _probe(
        self, site: str, backend: SharedPolling, row: PollSite, schedule: PollSchedule
    ) -> None:
        journal, engine = self.engine.journal, self.engine
        now = engine.clock()
        taken = journal.polls.take_poller(
            site, engine.owner, POLLER_TTL, now, after_round=row.round, probe=True
        )
        if taken is None:
            return
        due: datetime | None = None
        settle: Settle | None = None
        try:
            last = journal.polls.observations(site)
            open_jobs = [
                inv
                for inv in journal.polls.watched(site)
                if needs_observation(inv)
                and not _ended(last.get(inv.id), inv)
                and not _seen_ending_here(engine, inv)
            ]
            refs = [engine.adapters.job_ref(inv) for inv in open_jobs]
            self.probes_run += 1
            ended = backend.probe(refs) if refs else set()
            if ended and len(ended) == len(refs):
                # Nobody left to wait for: the round is due as soon as the floor allows.
                due = _round_after_ends(now, taken, schedule.floor)
            elif len(ended) > taken.ends_found and not _due(taken, now):
                # (A round already due is not put off by ends found meanwhile.)
                settle = _settle_on_ends(now, taken, schedule, len(ended))
        except BackendError:
            pass  # the next round will tell; a probe proves nothing by failing
        finally:
            record_probe(journal, site, engine.owner, ProbeSeen(now, due, settle))

    def _status(self, need: list[Invocation], backend: SharedPolling) -> dict[str, Seen]:
        if not need:
            return {}
        refs = [self.engine.adapters.job_ref(inv) for inv in need]
        try:
            statuses = backend.status(refs)
        except BackendError as exc:
            return {inv.id: seen_error(exc) for inv in need}
        return {
            # engine.seen records where each attempt runs (provenance) on the way.
            inv.id: seen_of(self.engine, inv, statuses[ref.job_name])
            for inv, ref in zip(need, refs, strict=True)
        }

    def _direct(self, invocations: Sequence[Invocation], backend: SharedPolling) -> dict[str, Seen]:
        return self._status(list(invocations), backend)

    def _read_facts(self, site: str, backend: SharedPolling) -> dict[str, str] | None:
        """The site's facts, asked once (by the poller) and kept in the journal."""
        try:
            facts = backend.site_facts()
        except BackendError:
            return None  # asked again by the next round's poller
        record_site_facts(self.engine.journal, site, facts)
        return facts

    def _schedule(self, backend: SharedPolling, row: PollSite) -> PollSchedule:
        return backend.poll_schedule(row.facts or {})

    def _held_by_other(self, row: PollSite, now: datetime) -> bool:
        if row.poller is None or row.poller == self.engine.owner:
            return False
        return not poller_free(row.poller, row.poller_expires_at, self.engine.owner, now)


def _round_after_ends(moment: datetime, row: PollSite, floor: float) -> datetime:
    """A round asked for at `moment` by ends a probe found, never sooner than the floor
    allows. (The journal keeps a round already due sooner.)"""
    return max(moment, _after(row.started_at, floor) or moment)


def _settle_on_ends(now: datetime, row: PollSite, schedule: PollSchedule, found: int) -> Settle:
    """The confirming round for ends found while other watched jobs still run: `settle` after
    the latest new end, so that ends coming one after another (a batch, or its waves as the
    nodes free up) are confirmed by one round; never later than `settle_max` after the first
    end found since the last round, and never sooner than the floor allows."""
    first = row.ends_first_at or now
    cap = max(schedule.settle, schedule.settle_max)  # (the config refuses a cap below settle)
    due = min(now + _seconds(schedule.settle), first + _seconds(cap))
    return Settle(found, first, _round_after_ends(due, row, schedule.floor))


def _due(row: PollSite, now: datetime) -> bool:
    due = row.next_due()
    return due is not None and due <= now


def _seen_ending_here(engine: Engine, inv: Invocation) -> bool:
    """Whether this process runs `inv`'s job under a process of its own that has not ended
    (its srun): that process's end tells, at once; a marker found first is no reason for a
    round."""
    ends = engine.adapters.end_signal(inv)
    return ends is not None and not ends.is_set()


def _ended(last: Observation | None, inv: Invocation) -> bool:
    """Whether the last round already saw this attempt end (its driver is acting on it)."""
    if last is None or (last.attempt, last.version) != (inv.attempt, inv.version):
        return False
    return decode_record(Seen, last.seen).sight in (Sight.ENDED, Sight.FENCED)


def _seconds(value: float) -> timedelta:
    return timedelta(seconds=value)


def _after(moment: datetime | None, seconds: float) -> datetime | None:
    return None if moment is None else moment + _seconds(seconds)
