"""Progress inside a state, recorded outside the history: how far each log has been copied
home, and where each declared artifact stands. Neither moves the state machine, but both must
survive a crash so that work resumes where it stopped instead of starting over."""

from __future__ import annotations

from enum import StrEnum

from msgspec import Struct

from vibesys.journal_schema.clock import iso, utc_now
from vibesys.journal_schema.journal_file import JournalFile


class ArtifactState(StrEnum):
    LISTED = "listed"  # the remote side reported it, with its size and sha256
    VERIFIED = "verified"  # downloaded and its sha256 matches
    ACKNOWLEDGED = "acknowledged"  # verified and recorded: the remote copy may be cleaned
    MISSING = "missing"  # declared, but nothing matched on the remote side
    MISMATCH = "mismatch"  # downloaded bytes differ from what the remote side listed
    REFUSED = "refused"  # over an artifact limit, or beyond where the bounded walk stopped


class ArtifactRow(Struct, frozen=True):
    attempt: int
    path: str
    size: int | None
    sha256: str | None
    state: ArtifactState
    local_path: str | None
    detail: str | None

    def to_json(self) -> dict[str, object]:
        return {
            "attempt": self.attempt,
            "path": self.path,
            "size": self.size,
            "sha256": self.sha256,
            "state": self.state,
            "local_path": self.local_path,
            "detail": self.detail,
        }


class ProgressStore:
    """Log spool offsets and artifact records of the Journal."""

    def __init__(self, file: JournalFile) -> None:
        self.conn = file.conn
        self.write_txn = file.write_txn

    def spool_offset(self, invocation_id: str, attempt: int, stream: str) -> int:
        row = self.conn.execute(
            "SELECT offset FROM spool WHERE invocation_id=? AND attempt=? AND stream=?",
            (invocation_id, attempt, stream),
        ).fetchone()
        return int(row[0]) if row else 0

    def commit_spool_offset(
        self, invocation_id: str, attempt: int, stream: str, offset: int
    ) -> None:
        with self.write_txn() as conn:
            conn.execute(
                "INSERT INTO spool (invocation_id, attempt, stream, offset, updated_at) "
                "VALUES (?,?,?,?,?) ON CONFLICT (invocation_id, attempt, stream) "
                "DO UPDATE SET offset=excluded.offset, updated_at=excluded.updated_at",
                (invocation_id, attempt, stream, offset, iso(utc_now())),
            )

    def record_artifact(
        self,
        invocation_id: str,
        attempt: int,
        path: str,
        state: ArtifactState,
        *,
        size: int | None = None,
        sha256: str | None = None,
        local_path: str | None = None,
        detail: str | None = None,
    ) -> None:
        with self.write_txn() as conn:
            conn.execute(
                "INSERT INTO artifacts (invocation_id, attempt, path, size, sha256, state, "
                "local_path, detail, updated_at) VALUES (?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT (invocation_id, attempt, path) DO UPDATE SET "
                "size=coalesce(excluded.size, size), sha256=coalesce(excluded.sha256, sha256), "
                "state=excluded.state, local_path=coalesce(excluded.local_path, local_path), "
                "detail=excluded.detail, updated_at=excluded.updated_at",
                (
                    invocation_id,
                    attempt,
                    path,
                    size,
                    sha256,
                    state,
                    local_path,
                    detail,
                    iso(utc_now()),
                ),
            )

    def artifacts(self, invocation_id: str, attempt: int | None = None) -> list[ArtifactRow]:
        where, params = "invocation_id=?", [invocation_id]
        if attempt is not None:
            where += " AND attempt=?"
            params.append(str(attempt))
        rows = self.conn.execute(
            "SELECT attempt, path, size, sha256, state, local_path, detail FROM artifacts "
            f"WHERE {where} ORDER BY attempt, path",
            params,
        ).fetchall()
        return [ArtifactRow(a, p, s, h, ArtifactState(st), lp, d) for a, p, s, h, st, lp, d in rows]
