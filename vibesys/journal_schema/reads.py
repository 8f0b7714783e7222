"""Reading invocations, attempts and histories: the Journal's queries (no writes but the
attempt details, which move nothing)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import datetime
from typing import Any

from vibesys.errors import ConfigError, UsageError
from vibesys.journal_schema.clock import iso, moment, moment_or_none
from vibesys.journal_schema.journal_file import JournalFile
from vibesys.journal_schema.records import Attempt, HistoryRow, Invocation, TypedRequest
from vibesys.journal_schema.sites import SiteRendering, SiteStore
from vibesys.states import FailureClass, JobState

#: The invocation row joined with its current attempt's facts (one indexed lookup each).
ROW_COLUMNS = (
    "i.id AS id, i.label AS label, i.adapter AS adapter, i.command AS command, "
    "i.request AS request, i.request_version AS request_version, i.cwd AS cwd, "
    "i.env_file AS env_file, i.site_digest AS site_digest, i.state AS state, "
    "i.version AS version, i.attempt AS attempt, "
    "i.max_retries AS max_retries, i.retries AS retries, i.outcome AS outcome, "
    "i.exit_code AS exit_code, i.failure_class AS failure_class, "
    "i.cancel_requested AS cancel_requested, i.not_before AS not_before, "
    "i.invocation_dir AS invocation_dir, i.created_at AS created_at, i.updated_at AS updated_at, "
    "i.lease_owner AS lease_owner, i.lease_expires_at AS lease_expires_at, "
    "i.settings AS settings, "
    "a.job_id AS a_job_id, a.dispatched_at AS a_dispatched_at, "
    "a.fence_intended_at AS a_fence_intended_at, a.intended_at AS a_intended_at, "
    "a.job_name AS a_job_name"
)
ROW_FROM = (
    "FROM invocations i LEFT JOIN attempts a ON a.invocation_id = i.id AND a.attempt = i.attempt"
)


#: Decodes a recorded request: the adapter's name, the request's JSON and the site
#: configuration recorded with it (None: none was).
RequestDecoder = Callable[[str, dict[str, Any], SiteRendering | None], TypedRequest]


class InvocationRows:
    """Makes `Invocation`s of the joined rows. The engine gives the journal a decoder (the
    adapters' typed requests), so each row's request is decoded once, as it is read; without
    one (the commands that only show rows) a row keeps just the recorded JSON."""

    def __init__(self, sites: SiteStore) -> None:
        self.sites = sites
        self.decoder: RequestDecoder | None = None
        #: renderings by digest: a digest names one text forever
        self._renderings: dict[str, SiteRendering] = {}

    def invocation(self, cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> Invocation:
        return self.typed(Invocation.from_row(as_dict(cursor, row)))

    def typed(self, inv: Invocation) -> Invocation:
        """`inv` with its request decoded from the recorded JSON, with the site recorded
        under its `site_digest`. Unchanged without a decoder, and where the request does not
        decode (a model that no longer fits, a site missing): whoever needs that request
        decodes it again and meets the error there, as one invocation's failure."""
        if self.decoder is None:
            return inv
        try:
            request = self.decoder(inv.adapter, inv.recorded_request, self.site(inv.site_digest))
        except (ConfigError, UsageError):
            return inv.evolve({"request": None})
        return inv.evolve({"request": request})

    def site(self, digest: str | None) -> SiteRendering | None:
        """The site configuration recorded under `digest`."""
        if digest is None:
            return None
        if digest not in self._renderings:
            found = self.sites.site_rendering(digest)
            if found is None:
                raise ConfigError(f"the journal has no site configuration sha256:{digest}")
            self._renderings[digest] = found
        return self._renderings[digest]


class InvocationStore:
    """Query of the journal."""

    def __init__(self, file: JournalFile, rows: InvocationRows) -> None:
        self.conn = file.conn
        self.write_txn = file.write_txn
        self.rows = rows

    def get(self, invocation_id: str) -> Invocation:
        cursor = self.conn.execute(
            f"SELECT {ROW_COLUMNS} {ROW_FROM} WHERE i.id=?", (invocation_id,)
        )
        row = cursor.fetchone()
        if row is None:
            raise UsageError(f"unknown invocation {invocation_id}")
        return self.rows.invocation(cursor, row)

    def resolve(self, prefix: str) -> Invocation:
        """The one invocation whose id starts with `prefix` (an index range scan)."""
        if not prefix:
            raise UsageError("an invocation id (or a unique prefix of one) is required")
        if not prefix.isprintable() or not prefix.isascii():
            shown = prefix.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            raise UsageError(f"{shown!r} is not an invocation id")
        cursor = self.conn.execute(
            f"SELECT {ROW_COLUMNS} {ROW_FROM} WHERE i.id >= ? AND i.id < ? ORDER BY i.id LIMIT 2",
            (prefix, prefix + "\U0010ffff"),
        )
        rows = cursor.fetchall()
        if not rows:
            raise UsageError(f"unknown invocation {prefix}")
        if len(rows) > 1 and rows[0][0] != prefix:  # an exact id wins over longer ones
            raise UsageError(f"invocation prefix {prefix} is ambiguous; give more characters")
        return self.rows.invocation(cursor, rows[0])

    def list_invocations(self, state: JobState | None = None) -> list[Invocation]:
        where, params = ("WHERE state=?", (state,)) if state else ("", ())
        cursor = self.conn.execute(
            f"SELECT {ROW_COLUMNS} {ROW_FROM} {where} ORDER BY created_at, i.id", params
        )
        return [self.rows.invocation(cursor, row) for row in cursor.fetchall()]

    def active(self) -> list[Invocation]:
        # `outcome IS NULL` selects the partial index of unfinished invocations (m005): DONE
        # always carries an outcome, so it names exactly the rows `state != DONE` does.
        cursor = self.conn.execute(
            f"SELECT {ROW_COLUMNS} {ROW_FROM} WHERE i.outcome IS NULL AND state != ? "
            "ORDER BY created_at, i.id",
            (JobState.DONE,),
        )
        return [self.rows.invocation(cursor, row) for row in cursor.fetchall()]

    def attempts(self, invocation_id: str) -> list[Attempt]:
        rows = self.conn.execute(
            "SELECT attempt, job_name, job_id, failure_class, intended_at, submitted_at, "
            "dispatched_at, fence_intended_at, claim, provenance "
            "FROM attempts WHERE invocation_id=? ORDER BY attempt",
            (invocation_id,),
        ).fetchall()
        return [
            Attempt(
                attempt=row[0],
                job_name=row[1],
                job_id=row[2],
                failure_class=FailureClass(row[3]) if row[3] else None,
                intended_at=moment(row[4]),
                submitted_at=moment_or_none(row[5]),
                dispatched_at=moment_or_none(row[6]),
                fence_intended_at=moment_or_none(row[7]),
                claim=row[8],
                provenance=json.loads(row[9]) if row[9] else {},
            )
            for row in rows
        ]

    def record_attempt_detail(
        self,
        invocation_id: str,
        attempt: int,
        *,
        claim: str | None = None,
        provenance: dict[str, Any] | None = None,
    ) -> None:
        """Keep what was learnt about an attempt (its claim, where it ran) beside it. Not a
        transition: it moves nothing, and a later reading may add to it."""
        with self.write_txn() as conn:
            if claim is not None:
                conn.execute(
                    "UPDATE attempts SET claim=? WHERE invocation_id=? AND attempt=?",
                    (claim, invocation_id, attempt),
                )
            if provenance:
                row = conn.execute(
                    "SELECT provenance FROM attempts WHERE invocation_id=? AND attempt=?",
                    (invocation_id, attempt),
                ).fetchone()
                merged = {**(json.loads(row[0]) if row and row[0] else {}), **provenance}
                conn.execute(
                    "UPDATE attempts SET provenance=? WHERE invocation_id=? AND attempt=?",
                    (json.dumps(merged, sort_keys=True), invocation_id, attempt),
                )

    def unreachable_since(self, invocation_id: str, attempt: int) -> datetime | None:
        """The attempt's first unreachable observation, while its outage lasts."""
        row = self.conn.execute(
            "SELECT unreachable_since FROM attempts WHERE invocation_id=? AND attempt=?",
            (invocation_id, attempt),
        ).fetchone()
        return moment(row[0]) if row and row[0] else None

    def mark_unreachable(self, invocation_id: str, attempt: int, at: datetime) -> datetime:
        """Record `at` as the attempt's first unreachable observation unless one is recorded
        already; return the one that is. Not a transition: it moves nothing."""
        with self.write_txn() as conn:
            conn.execute(
                "UPDATE attempts SET unreachable_since=coalesce(unreachable_since, ?) "
                "WHERE invocation_id=? AND attempt=?",
                (iso(at), invocation_id, attempt),
            )
            row = conn.execute(
                "SELECT unreachable_since FROM attempts WHERE invocation_id=? AND attempt=?",
                (invocation_id, attempt),
            ).fetchone()
        return moment(row[0]) if row and row[0] else at

    def clear_unreachable(self, invocation_id: str, attempt: int) -> None:
        """The attempt's scheduler answered: an outage that comes later starts its own count."""
        with self.write_txn() as conn:
            conn.execute(
                "UPDATE attempts SET unreachable_since=NULL "
                "WHERE invocation_id=? AND attempt=? AND unreachable_since IS NOT NULL",
                (invocation_id, attempt),
            )

    def history(self, invocation_id: str) -> list[HistoryRow]:
        rows = self.conn.execute(
            "SELECT seq, from_state, to_state, event, at, evidence FROM history "
            "WHERE invocation_id=? ORDER BY seq",
            (invocation_id,),
        ).fetchall()
        return [
            HistoryRow(seq, JobState(src), JobState(dst), event, moment(at), json.loads(evidence))
            for seq, src, dst, event, at, evidence in rows
        ]

    def raw_history(self, invocation_id: str) -> list[tuple[int, str, str, str, str]]:
        """(seq, from, to, event, evidence) exactly as stored, for verification."""
        return self.conn.execute(
            "SELECT seq, from_state, to_state, event, evidence FROM history "
            "WHERE invocation_id=? ORDER BY seq",
            (invocation_id,),
        ).fetchall()

    def all_ids(self) -> list[str]:
        return [row[0] for row in self.conn.execute("SELECT id FROM invocations ORDER BY id")]


def as_dict(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> dict[str, Any]:
    return {column[0]: value for column, value in zip(cursor.description, row, strict=True)}
