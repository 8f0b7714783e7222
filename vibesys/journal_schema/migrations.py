"""Append-only schema migrations. Never edit a released step; add the next one.

sqlite-utils records each applied step in `_sqlite_migrations` in the same transaction as the
step itself. A journal that lists a step this code does not know was written by a newer
vibesys and is refused (see store.open_journal).
"""

from __future__ import annotations

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

MIGRATION_SET = "vibesys"
migrations = Migrations(MIGRATION_SET)


@migrations()
def m001_invocations_attempts_history(db: Database) -> None:
    db.table("invocations").create(
        {
            "id": str,
            "label": str,
            "adapter": str,
            "command": str,  # JSON list of argv
            "options": str,  # JSON object of adapter options (gpus, time, partition, ...)
            "state": str,
            "version": int,  # bumped by every transition: the compare-and-swap token
            "attempt": int,
            "max_retries": int,
            "retries": int,  # infrastructure failures so far
            "outcome": str,
            "exit_code": int,
            "failure_class": str,
            "cancel_requested": int,
            "not_before": str,  # earliest time of the next attempt (RETRYING)
            "run_dir": str,
            "created_at": str,
            "updated_at": str,
            "lease_owner": str,  # host:pid:start of the live `vibesys` process driving it
            "lease_expires_at": str,
        },
        pk="id",
        not_null={
            "adapter",
            "command",
            "options",
            "state",
            "version",
            "attempt",
            "max_retries",
            "retries",
            "cancel_requested",
            "run_dir",
            "created_at",
            "updated_at",
        },
        defaults={"options": "{}", "attempt": 0, "retries": 0, "cancel_requested": 0},
    )
    db.table("invocations").create_index(["state"])
    db.table("attempts").create(
        {
            "invocation_id": str,
            "attempt": int,
            "job_name": str,  # stable, scheduler-visible: derived from invocation id and attempt
            "job_id": str,
            "failure_class": str,
            "intended_at": str,
            "submitted_at": str,
        },
        pk=("invocation_id", "attempt"),
        not_null={"job_name", "intended_at"},
        foreign_keys=[("invocation_id", "invocations", "id")],
    )
    db.table("attempts").create_index(["job_name"], unique=True)
    db.table("history").create(
        {
            "invocation_id": str,
            "seq": int,
            "from_state": str,
            "to_state": str,
            "event": str,
            "evidence": str,  # JSON: the event's payload, the raw observation that justified it
            "at": str,  # ISO-8601 UTC
        },
        pk=("invocation_id", "seq"),
        not_null={"from_state", "to_state", "event", "evidence", "at"},
        foreign_keys=[("invocation_id", "invocations", "id")],
    )
    # The history is append-only: the database itself refuses edits.
    for action in ("UPDATE", "DELETE"):
        db.execute(
            f"CREATE TRIGGER history_no_{action.lower()} BEFORE {action} ON history "
            "BEGIN SELECT RAISE(ABORT, 'history is append-only'); END"
        )


@migrations()
def m002_spool_artifacts_snapshot(db: Database) -> None:
    # How far each log of each attempt has been copied home: reading resumes here after a
    # reconnect or a crash, so the local spool ends byte-identical to the remote file.
    db.table("spool").create(
        {"invocation_id": str, "attempt": int, "stream": str, "offset": int, "updated_at": str},
        pk=("invocation_id", "attempt", "stream"),
        not_null={"offset", "updated_at"},
        foreign_keys=[("invocation_id", "invocations", "id")],
    )
    # Declared artifacts of each attempt: listed remotely with size and sha256, downloaded,
    # verified, then acknowledged (only then may the remote side be cleaned).
    db.table("artifacts").create(
        {
            "invocation_id": str,
            "attempt": int,
            "path": str,
            "size": int,
            "sha256": str,
            "state": str,  # listed | verified | acknowledged | missing | mismatch
            "local_path": str,
            "detail": str,
            "updated_at": str,
        },
        pk=("invocation_id", "attempt", "path"),
        not_null={"state", "updated_at"},
        foreign_keys=[("invocation_id", "invocations", "id")],
    )
    # The candidate snapshot's content digest, recorded at PREPARED.
    db.table("invocations").add_column("snapshot_digest", str)


KNOWN = frozenset(m.name for m in migrations._migrations)
