"""The shared poll budget's records (m005): per site, who runs the current status round (a
short poller lease), which round was completed last, when the next is due and the site's
facts; per watched invocation, what the last round saw of its current attempt.

These rows are a shared cache of observations, not the record of what happened (that is the
history): they are written with `synchronous=NORMAL` (no fsync of their own; the next
transition's commit syncs them with it). Losing the last of them to a power cut costs one
more status round, never a decision: a decision is only taken from an observation made after
the invocation's current version was committed.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from msgspec import Struct

from vibesys.journal_schema.clock import iso, moment, moment_or_none
from vibesys.journal_schema.journal_file import JournalFile
from vibesys.journal_schema.reads import ROW_COLUMNS, ROW_FROM, InvocationRows
from vibesys.journal_schema.records import Invocation
from vibesys.osutil.proc import identity_alive


class PollSite(Struct, frozen=True):
    site: str
    #: the last round completed (0: none yet)
    round: int
    poller: str | None
    poller_expires_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    due_at: datetime | None
    probed_at: datetime | None
    facts: dict[str, str] | None
    #: how many ended jobs the probes found since the last round, the first found when, and
    #: the round those ends ask for (a round is due at the sooner of this and `due_at`)
    ends_found: int = 0
    ends_first_at: datetime | None = None
    settle_due_at: datetime | None = None

    def next_due(self) -> datetime | None:
        """When the next round is due: the schedule's (or a cancel's) time, or sooner the one
        the ends found by probes ask for."""
        dues = [d for d in (self.due_at, self.settle_due_at) if d is not None]
        return min(dues, default=None)


class Settle(Struct, frozen=True):
    """What a probe that found more ended jobs than the probes before it since the last round
    leaves for the confirming round: how many it found, when the first of them was found, and
    when the round is due."""

    found: int
    first_at: datetime
    due_at: datetime


class Observation(Struct, frozen=True):
    """What round `round` saw of `invocation_id`'s attempt `attempt`, taken for the row at
    `version` (so made after that version was committed)."""

    invocation_id: str
    attempt: int
    version: int
    round: int
    #: the observation, as `codec.encode_record` wrote it (the reader decodes its type)
    seen: str
    observed_at: datetime


class Observed(Struct, frozen=True):
    """One row a poller writes at the end of its round."""

    invocation_id: str
    attempt: int
    version: int
    #: the observation, encoded (`codec.encode_record`)
    seen: str


_SITE_COLUMNS = (
    "site, round, poller, poller_expires_at, started_at, finished_at, due_at, probed_at, facts, "
    "ends_found, ends_first_at, settle_due_at"
)


def _site(row: tuple[Any, ...]) -> PollSite:
    site, number, poller, expires, started, finished, due, probed, facts = row[:9]
    found, first, settle = row[9:]
    return PollSite(
        site,
        number,
        poller,
        moment_or_none(expires),
        moment_or_none(started),
        moment_or_none(finished),
        moment_or_none(due),
        moment_or_none(probed),
        json.loads(facts) if facts else None,
        found,
        moment_or_none(first),
        moment_or_none(settle),
    )


def poller_free(holder: str | None, expires: datetime | None, owner: str, now: datetime) -> bool:
    """Whether `owner` may run the site's round: no poller, itself, a poller provably dead,
    or a lease expired, even if its holder lives. Unlike an invocation's lease, a frozen
    (SIGSTOPped) poller must not keep everyone blind: a round only reads, and a late poller's
    round is refused when it finishes (`finish_round`), so a second one is harmless."""
    if holder is None or holder == owner:
        return True
    if identity_alive(holder) is False:
        return True
    return expires is None or expires <= now


class PollStore:
    """Shared poll budget of the journal."""

    def __init__(self, file: JournalFile, rows: InvocationRows) -> None:
        self.conn = file.conn
        self.write_txn = file.write_txn
        self.rows = rows

    @contextmanager
    def _relaxed(self) -> Iterator[sqlite3.Connection]:
        """One write transaction without its own fsync (see the module docstring)."""
        self.conn.execute("PRAGMA synchronous=NORMAL")
        try:
            with self.write_txn() as conn:
                yield conn
        finally:
            self.conn.execute("PRAGMA synchronous=FULL")

    # -- reading ----------------------------------------------------------------------------

    def poll_site(self, site: str) -> PollSite | None:
        row = self.conn.execute(
            f"SELECT {_SITE_COLUMNS} FROM poll_sites WHERE site=?", (site,)
        ).fetchone()
        return None if row is None else _site(row)

    def observation(self, site: str, invocation_id: str) -> Observation | None:
        row = self.conn.execute(
            "SELECT attempt, version, round, seen, observed_at FROM poll_watch "
            "WHERE site=? AND invocation_id=?",
            (site, invocation_id),
        ).fetchone()
        if row is None or row[2] is None:
            return None
        attempt, version, round_, seen, observed_at = row
        return Observation(invocation_id, attempt, version, round_, seen, moment(observed_at))

    def watched(self, site: str) -> list[Invocation]:
        """Every invocation watched at `site`, as its row stands now."""
        cursor = self.conn.execute(
            f"SELECT {ROW_COLUMNS} {ROW_FROM} JOIN poll_watch w ON w.invocation_id = i.id "
            "WHERE w.site=? ORDER BY i.created_at, i.id",
            (site,),
        )
        return [self.rows.invocation(cursor, row) for row in cursor.fetchall()]

    def observations(self, site: str) -> dict[str, Observation]:
        rows = self.conn.execute(
            "SELECT invocation_id, attempt, version, round, seen, observed_at FROM poll_watch "
            "WHERE site=? AND round IS NOT NULL",
            (site,),
        ).fetchall()
        return {r[0]: Observation(r[0], r[1], r[2], r[3], r[4], moment(r[5])) for r in rows}

    # -- writing ----------------------------------------------------------------------------

    def watch(
        self,
        site: str,
        invocation_ids: Sequence[str],
        *,
        now: datetime | None = None,
        hold_until: datetime | None = None,
    ) -> None:
        """Have every round at `site` observe these invocations (until they need it no more).
        Newly watched ones make a round that nobody has waited for (its time is past) due at
        `hold_until`, not at once: a job just submitted needs no scheduler query yet. While no
        watched job of the site has been observed (a burst of submissions from idle), the
        first look waits for the newest of them alike, but the oldest waits at most twice the
        hold: one first round for the burst, not one for its first job and another soon
        after for the rest."""
        known = {
            row[0]
            for row in self.conn.execute(
                "SELECT invocation_id FROM poll_watch WHERE site=?", (site,)
            )
        }
        missing = [i for i in invocation_ids if i not in known]
        if not missing:
            return
        with self._relaxed() as conn:
            conn.execute("INSERT OR IGNORE INTO poll_sites (site) VALUES (?)", (site,))
            conn.executemany(
                "INSERT OR IGNORE INTO poll_watch (site, invocation_id) VALUES (?, ?)",
                [(site, i) for i in missing],
            )
            if hold_until is not None and now is not None:
                # Only the unfinished count: one that ended unobserved (its own srun told)
                # is forgotten by the next round, and until then says nothing of the burst.
                oldest, observed = conn.execute(
                    "SELECT min(i.updated_at), max(w.round) FROM poll_watch w "
                    "JOIN invocations i ON i.id = w.invocation_id "
                    "WHERE w.site=? AND i.outcome IS NULL",
                    (site,),
                ).fetchone()
                if observed is None and oldest is not None:
                    cap = moment(oldest) + 2 * (hold_until - now)
                    conn.execute(
                        "UPDATE poll_sites SET due_at=? WHERE site=?",
                        (iso(min(hold_until, max(cap, now))), site),
                    )
                else:
                    conn.execute(
                        "UPDATE poll_sites SET due_at=? WHERE site=? "
                        "AND (due_at IS NULL OR due_at < ?)",
                        (iso(hold_until), site, iso(now)),
                    )

    def take_poller(
        self,
        site: str,
        owner: str,
        ttl: timedelta,
        now: datetime,
        *,
        after_round: int,
        force: bool = False,
        probe: bool = False,
    ) -> PollSite | None:
        """Take the site's poller lease to run the round after `after_round` (or, `probe`, a
        probe), if it is still the next one, it is due (or `force`) and no live process holds
        the lease. Returns the site as it was when taken, or None."""
        with self._relaxed() as conn:
            row = conn.execute(
                f"SELECT {_SITE_COLUMNS} FROM poll_sites WHERE site=?", (site,)
            ).fetchone()
            if row is None:
                return None
            current = _site(row)
            if current.round != after_round:
                return None  # someone completed that round meanwhile
            if not poller_free(current.poller, current.poller_expires_at, owner, now):
                return None
            due = current.next_due()
            if not (force or probe) and due and due > now:
                return None
            started = current.started_at if probe else now
            conn.execute(
                "UPDATE poll_sites SET poller=?, poller_expires_at=?, started_at=? WHERE site=?",
                (owner, iso(now + ttl), None if started is None else iso(started), site),
            )
        return current

    def finish_round(
        self,
        site: str,
        owner: str,
        now: datetime,
        due_at: datetime,
        observed: Sequence[Observed],
        forget: Sequence[str] = (),
    ) -> int | None:
        """Store the round's observations, bump the round and release the lease, in one
        transaction; forget the invocations that need no more watching. Returns the new round
        number, or None when the lease was lost meanwhile (nothing is stored then)."""
        at = iso(now)
        with self._relaxed() as conn:
            row = conn.execute(
                "SELECT round, poller FROM poll_sites WHERE site=?", (site,)
            ).fetchone()
            if row is None or row[1] != owner:
                return None
            number = int(row[0]) + 1
            conn.executemany(
                "UPDATE poll_watch SET attempt=?, version=?, round=?, seen=?, observed_at=? "
                "WHERE site=? AND invocation_id=?",
                [
                    (o.attempt, o.version, number, o.seen, at, site, o.invocation_id)
                    for o in observed
                ],
            )
            conn.executemany(
                "DELETE FROM poll_watch WHERE site=? AND invocation_id=?",
                [(site, i) for i in forget],
            )
            conn.execute(
                "UPDATE poll_sites SET round=?, poller=NULL, poller_expires_at=NULL, "
                "finished_at=?, due_at=?, probed_at=?, ends_found=0, ends_first_at=NULL, "
                "settle_due_at=NULL WHERE site=?",
                (number, at, iso(due_at), at, site),
            )
        return number

    def release_poller(
        self,
        site: str,
        owner: str,
        *,
        probed_at: datetime | None = None,
        due_at: datetime | None = None,
        settle: Settle | None = None,
    ) -> None:
        """Give the lease back without a round (after a probe, or a failure to poll); a probe
        that found every watched job ended makes the next round due no later than `due_at` (a
        round due sooner stays so: later probes never put off what an earlier one, or a cancel,
        asked). A probe that found more ends while other jobs still run leaves `settle`: it
        replaces the last probe's, so that more ends put the confirming round off, within the
        cap counted from the first."""
        due = None if due_at is None else iso(due_at)
        with self._relaxed() as conn:
            released = conn.execute(
                "UPDATE poll_sites SET poller=NULL, poller_expires_at=NULL, "
                "probed_at=coalesce(?, probed_at), "
                "due_at=CASE WHEN due_at IS NULL OR ? < due_at THEN coalesce(?, due_at) "
                "ELSE due_at END WHERE site=? AND poller=?",
                (None if probed_at is None else iso(probed_at), due, due, site, owner),
            )
            if settle is not None and released.rowcount == 1:  # still ours: no round meanwhile
                conn.execute(
                    "UPDATE poll_sites SET ends_found=?, ends_first_at=?, settle_due_at=? "
                    "WHERE site=?",
                    (settle.found, iso(settle.first_at), iso(settle.due_at), site),
                )

    def advance_due(self, site: str, due_at: datetime) -> None:
        """Make the next round due no later than `due_at`."""
        at = iso(due_at)
        with self._relaxed() as conn:
            conn.execute(
                "UPDATE poll_sites SET due_at=? WHERE site=? AND (due_at IS NULL OR due_at > ?)",
                (at, site, at),
            )

    def record_site_facts(self, site: str, facts: dict[str, str]) -> None:
        with self._relaxed() as conn:
            conn.execute("INSERT OR IGNORE INTO poll_sites (site) VALUES (?)", (site,))
            conn.execute(
                "UPDATE poll_sites SET facts=? WHERE site=?",
                (json.dumps(facts, sort_keys=True), site),
            )
