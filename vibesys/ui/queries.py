"""The invocations list: its filters (from the URL), one keyset page of it, the counts per
state, and the other lists the pages show (the clusters, the broker's queue).

Pages are keyset pages over the id, newest first: ids sort by creation (older journals' random
ids sort as they come), so a page never shifts when invocations are added in front of it. The
first page without filters costs two index lookups besides its rows: the number of
invocations, and the unfinished ones per state from the partial index `invocations_active`
(every other invocation is DONE). A filtered page chooses its ids first (a short walk of the id
index, or a scan when the walk finds too few) and reads its rows after; its counts are one
count of the filter's rows and the unfinished ones from the partial index.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from vibesys.journal_schema.queue import QueuePlace
from vibesys.journal_schema.reads import ROW_COLUMNS, ROW_FROM, as_dict
from vibesys.journal_schema.records import Invocation
from vibesys.journal_schema.store import Journal
from vibesys.states import JobState

#: The label the GPU broker gives each command it runs (`vibesys/broker/engine_runner.py`).
BROKER_LABEL = "vibesys-gpu"
PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
#: How far a filtered page walks the id index before it scans instead (see `_page_ids`).
PROBE_ROWS = 2000
#: The unfinished invocations, named: left to itself the planner may prefer a filter's index
#: (every invocation of an adapter) to the few rows of the partial index.
ACTIVE = "invocations i INDEXED BY invocations_active"
#: The longest value a filter takes: a label, an adapter, a campaign.
MAX_VALUE = 200
_ID = re.compile(r"[0-9a-f]{1,32}")
_RELATIVE = re.compile(r"(\d{1,6})([smhdw])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
#: What `run_id` looks like in a request's JSON (sorted keys, json.dumps' separators).
_RUN_ID_KEY = '"run_id"'


class BadQuery(Exception):
    """Input the UI refuses (400): the message names the parameter and its value."""


class NotFound(Exception):
    """Nothing of that name (404)."""


def invocation_id(text: str) -> str:
    """A (prefix of an) invocation id as the URL gives it, or BadQuery."""
    if not _ID.fullmatch(text):
        raise BadQuery(f"{text[:40]!r} is not an invocation id (hex digits)")
    return text


def find(journal: Journal, prefix: str) -> Invocation:
    """The invocation whose id is, or uniquely starts with, `prefix`."""
    rows = journal.conn.execute(
        "SELECT id FROM invocations WHERE id >= ? AND id < ? ORDER BY id LIMIT 2",
        (prefix, prefix + "\U0010ffff"),
    ).fetchall()
    if not rows:
        raise NotFound(f"no invocation {prefix}")
    if len(rows) > 1 and rows[0][0] != prefix:
        raise BadQuery(f"invocation prefix {prefix} is ambiguous; give more characters")
    return journal.invocations.get(rows[0][0])


def parse_time(name: str, text: str, now: datetime) -> str:
    """`15m`, `2h`, `3d`, `1w` before now, or an ISO date or time (UTC unless it says), as the
    journal's ISO-8601 UTC text."""
    try:
        if match := _RELATIVE.fullmatch(text):
            moment = now - timedelta(**{_UNITS[match[2]]: int(match[1])})
        else:
            moment = datetime.fromisoformat(text)
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC).isoformat()
    except ValueError:
        raise BadQuery(
            f"{name}={text[:40]!r}: give a time (2026-11-30T10:00) or an age (15m, 2h, 3d)"
        ) from None
    except OverflowError:  # an age before year 1, or a time that UTC cannot hold
        raise BadQuery(f"{name}={text[:40]!r}: out of range") from None


def _text(name: str, value: str) -> str:
    if len(value) > MAX_VALUE or not value.isprintable():
        raise BadQuery(f"{name}: at most {MAX_VALUE} printable characters")
    return value


class ListFilter(msgspec.Struct, frozen=True):
    """What the list shows, as the URL says it (every field is one query parameter)."""

    states: tuple[JobState, ...] = ()
    adapter: str = ""
    label: str = ""
    campaign: str = ""
    #: as given (shown back in the form) and as the journal's UTC text
    since: str = ""
    until: str = ""
    since_at: str = ""
    until_at: str = ""
    before: str = ""
    after: str = ""
    limit: int = PAGE_SIZE

    #: every parameter the list takes; `token` is the server's
    PARAMS = ("state", "adapter", "label", "campaign", "since", "until", "before", "after", "limit")

    @classmethod
    def parse(cls, params: Iterable[tuple[str, str]], now: datetime) -> ListFilter:
        values: dict[str, Any] = {}
        states: list[JobState] = []
        for name, value in params:
            if name == "token":
                continue
            if name not in cls.PARAMS:
                raise BadQuery(f"unknown parameter {name[:40]!r}")
            if name == "state":
                for word in filter(None, value.upper().split(",")):
                    if word not in JobState.__members__:
                        raise BadQuery(f"state={word[:40]!r}: one of {', '.join(JobState)}")
                    if JobState(word) not in states:
                        states.append(JobState(word))
                continue
            if name in values:
                raise BadQuery(f"{name} given twice")
            if not value:
                continue
            if name in ("before", "after"):
                values[name] = invocation_id(value)
            elif name == "limit":
                if not value.isdecimal() or not 1 <= int(value) <= MAX_PAGE_SIZE:
                    raise BadQuery(f"limit={value[:40]!r}: a number from 1 to {MAX_PAGE_SIZE}")
                values[name] = int(value)
            elif name in ("since", "until"):
                values[name] = _text(name, value)
                values[f"{name}_at"] = parse_time(name, value, now)
            else:
                values[name] = _text(name, value)
        if values.get("before") and values.get("after"):
            raise BadQuery("give before or after, not both")
        return cls(states=tuple(states), **values)

    def params(self, **changes: Any) -> dict[str, str]:
        """The URL parameters of this filter with `changes` (a new page, another state)."""
        shown = msgspec.structs.replace(self, **changes)
        found = {
            "state": ",".join(shown.states),
            "adapter": shown.adapter,
            "label": shown.label,
            "campaign": shown.campaign,
            "since": shown.since,
            "until": shown.until,
            "before": shown.before,
            "after": shown.after,
            "limit": "" if shown.limit == PAGE_SIZE else str(shown.limit),
        }
        return {name: value for name, value in found.items() if value}

    @property
    def narrowed(self) -> bool:
        """Whether anything but the state and the page narrows the list."""
        return bool(self.adapter or self.label or self.campaign or self.since_at or self.until_at)

    def where(self, *, with_state: bool = True) -> tuple[list[str], list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if with_state and self.states:
            clauses.append(f"i.state IN ({','.join('?' * len(self.states))})")
            params += self.states
        # The cheap text test first for a campaign: most requests have no run id at all.
        campaign = "instr(i.request, ?) > 0 AND json_extract(i.request, '$.run_id') = ?"
        for value, sql, values in (
            (self.adapter, "i.adapter = ?", [self.adapter]),
            (self.label, "instr(i.label, ?) > 0", [self.label]),
            (self.campaign, campaign, [_RUN_ID_KEY, self.campaign]),
            (self.since_at, "i.created_at >= ?", [self.since_at]),
            (self.until_at, "i.created_at < ?", [self.until_at]),
        ):
            if value:
                clauses.append(sql)
                params += values
        return clauses, params


class Row(msgspec.Struct, frozen=True):
    inv: Invocation
    #: the SkyPilot run id (`--run-id`) where there is one
    campaign: str | None
    #: what the last status round saw of it, while it is not DONE (sight, the scheduler's reason)
    seen: dict[str, Any] = msgspec.field(default_factory=dict)
    #: its place in its campaign's queue, while it waits there (recorded, nothing sent)
    waiting: QueuePlace | None = None


class Page(msgspec.Struct, frozen=True):
    rows: list[Row]
    counts: dict[str, int]
    total: int
    #: cursors: `after=newer` shows the page before this one, `before=older` the next
    newer: str | None
    older: str | None


def campaign_of(inv: Invocation) -> str | None:
    run_id = inv.recorded_request.get("run_id")
    return str(run_id) if run_id else None


def list_page(journal: Journal, flt: ListFilter) -> Page:
    newest_first = not flt.after
    ids = _page_ids(journal, flt, newest_first)
    more = len(ids) > flt.limit
    ids = ids[: flt.limit]
    invs: list[Invocation] = []
    if ids:
        # The page's rows only, joined with their attempts once chosen (never before a sort).
        cursor = journal.conn.execute(
            f"SELECT {ROW_COLUMNS} {ROW_FROM} WHERE i.id IN ({','.join('?' * len(ids))}) "
            "ORDER BY i.id DESC",
            ids,
        )
        invs = [Invocation.from_row(as_dict(cursor, row)) for row in cursor.fetchall()]
    seen = _seen(journal, [i.id for i in invs if i.state is not JobState.DONE])
    rows = [Row(i, campaign_of(i), seen.get(i.id, {}), _waiting(journal, i)) for i in invs]
    counts, total = state_counts(journal, flt)
    newer = older = None
    if invs:
        if (newest_first and flt.before) or (not newest_first and more):
            newer = invs[0].id
        if (newest_first and more) or (not newest_first):
            older = invs[-1].id
    return Page(rows, counts, total, newer, older)


def _page_ids(journal: Journal, flt: ListFilter, newest_first: bool) -> list[str]:
    """The ids of the page (and one more, if there is more), in page order.

    Walking the id index stops after a page of matches but reads each row it passes; a filter
    few rows match is cheaper as a scan in table order keeping the best ids. Which one a
    filter is, the first PROBE_ROWS of the walk tell: a page of matches there ends it."""
    conn, want = journal.conn, flt.limit + 1
    clauses, params = flt.where()
    order, past = ("DESC", "<") if newest_first else ("ASC", ">")
    cursor = [f"i.id {past} ?"] if flt.before or flt.after else []
    start = [flt.before or flt.after] if cursor else []
    if bool(flt.states) and JobState.DONE not in flt.states:
        # The unfinished ones: the partial index holds them all (and only them).
        where = " AND ".join([*clauses, *cursor, "i.outcome IS NULL"])
        sql = f"SELECT i.id FROM {ACTIVE} WHERE {where} ORDER BY +i.id {order} LIMIT ?"
        return [r[0] for r in conn.execute(sql, [*params, *start, want])]
    if not clauses:
        where = f"WHERE {cursor[0]}" if cursor else ""
        sql = f"SELECT i.id FROM invocations i {where} ORDER BY i.id {order} LIMIT ?"
        return [r[0] for r in conn.execute(sql, [*start, want])]
    test = " AND ".join(clauses)
    where = f"WHERE {cursor[0]}" if cursor else ""
    walk = conn.execute(
        f"SELECT i.id, {test} FROM invocations i {where} ORDER BY i.id {order} LIMIT ?",
        [*params, *start, PROBE_ROWS],
    )
    found: list[str] = []
    walked, last = 0, ""
    for last, hit in walk:  # stepped one row at a time: it stops at the page's last match
        walked += 1
        if hit:
            found.append(last)
            if len(found) == want:
                break
    walk.close()
    if len(found) == want or walked < PROBE_ROWS:
        return found
    rest = " AND ".join([*clauses, f"+i.id {past} ?"])  # from an index or a scan, not the walk
    sql = f"SELECT i.id FROM invocations i WHERE {rest} ORDER BY +i.id {order} LIMIT ?"
    return found + [r[0] for r in conn.execute(sql, [*params, last, want - len(found)])]


def list_fingerprint(journal: Journal) -> tuple[object, ...]:
    """Changes whenever anything a list shows may have (a few index reads): a new invocation,
    a transition of an unfinished one (its version; a DONE row never changes again), a status
    round's observation, a campaign queue's. A lease's renewal, the most frequent commit,
    changes none of them."""
    conn = journal.conn
    return (
        conn.execute("SELECT count(*) FROM invocations").fetchone()[0],
        conn.execute(
            f"SELECT group_concat(i.id || ':' || i.version) FROM {ACTIVE} WHERE i.outcome IS NULL"
        ).fetchone()[0],
        tuple(
            conn.execute("SELECT count(*), max(round), max(observed_at) FROM poll_watch").fetchone()
        ),
        conn.execute("SELECT max(seq) FROM campaign_queue").fetchone()[0],
    )


def _waiting(journal: Journal, inv: Invocation) -> QueuePlace | None:
    if inv.state is not JobState.PREPARED:
        return None
    place = journal.queue.queue_place(inv.id)
    return place if place is not None and place.ahead else None


def state_counts(journal: Journal, flt: ListFilter) -> tuple[dict[str, int], int]:
    """Invocations per state under the filter's other conditions (its states aside, so each
    state's count says what choosing it would show), and their sum."""
    conn = journal.conn
    counts = dict.fromkeys(JobState, 0)
    if not flt.narrowed:
        total = conn.execute("SELECT count(*) FROM invocations").fetchone()[0]
        active = conn.execute(
            "SELECT state, count(*) FROM invocations WHERE outcome IS NULL GROUP BY state"
        ).fetchall()
        counts.update({JobState(s): n for s, n in active})
        counts[JobState.DONE] = total - sum(n for _, n in active)
    else:
        # Every invocation but the unfinished ones (the partial index) is DONE: one count of
        # the filter's rows, no grouping of them all by state.
        clauses, params = flt.where(with_state=False)
        where = " AND ".join(clauses)
        total = conn.execute(f"SELECT count(*) FROM invocations i WHERE {where}", params)
        matching = total.fetchone()[0]
        active = conn.execute(
            f"SELECT i.state, count(*) FROM {ACTIVE} WHERE i.outcome IS NULL AND {where} "
            "GROUP BY i.state",
            params,
        ).fetchall()
        counts.update({JobState(s): n for s, n in active})
        counts[JobState.DONE] = matching - sum(n for _, n in active)
    return {str(state): n for state, n in counts.items()}, sum(counts.values())


def _seen(journal: Journal, ids: list[str]) -> dict[str, dict[str, Any]]:
    """The last status round's observation of each of `ids` (the shared poll's cache)."""
    if not ids:
        return {}
    rows = journal.conn.execute(
        f"SELECT invocation_id, seen FROM poll_watch WHERE invocation_id IN "
        f"({','.join('?' * len(ids))}) AND seen IS NOT NULL",
        ids,
    ).fetchall()
    return {invocation: json.loads(seen) for invocation, seen in rows}


def observation(journal: Journal, inv: Invocation) -> dict[str, Any]:
    """What the last status round saw of `inv`'s current attempt (empty when none did)."""
    row = journal.conn.execute(
        "SELECT attempt, seen, observed_at FROM poll_watch WHERE invocation_id=? "
        "AND seen IS NOT NULL ORDER BY observed_at DESC LIMIT 1",
        (inv.id,),
    ).fetchone()
    if row is None or row[0] != inv.attempt:
        return {}
    return {**json.loads(row[1]), "observed_at": row[2]}


def broker_jobs(journal: Journal, finished: int = 20) -> tuple[list[Row], list[Row]]:
    """The broker's GPU commands: those not DONE (queued or running at the scheduler), and
    the last `finished` ones. Commands still waiting for one of the broker's own slots are
    not in the journal yet (nothing of them is submitted)."""
    conn = journal.conn

    def rows(sql: str, params: tuple[Any, ...]) -> list[Invocation]:
        cursor = conn.execute(f"SELECT {ROW_COLUMNS} {ROW_FROM} {sql}", params)
        return [Invocation.from_row(as_dict(cursor, row)) for row in cursor.fetchall()]

    active = rows("WHERE i.outcome IS NULL AND i.label = ? ORDER BY i.id", (BROKER_LABEL,))
    done = rows(
        "WHERE i.outcome IS NOT NULL AND i.label = ? ORDER BY i.id DESC LIMIT ?",
        (BROKER_LABEL, finished),
    )
    seen = _seen(journal, [i.id for i in active])
    return (
        [Row(i, campaign_of(i), seen.get(i.id, {})) for i in active],
        [Row(i, campaign_of(i)) for i in done],
    )


def now_utc() -> datetime:
    return datetime.now(UTC)
