"""The first schema steps (m001 to m005); `migrations.py` adds the later ones to the same set."""

from __future__ import annotations

import json

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

from vibesys.journal_schema.legacy_requests import request_from_options
from vibesys.journal_schema.schema_steps import MIGRATION_SET

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


@migrations()
def m003_typed_requests_fences_context(db: Database) -> None:
    # Each attempt records how far its submission got and how it was settled: dispatched (the
    # submit may have happened), a fence intended (its outcome is being proven), the claim
    # found in the job's attempt directory, and where it ran (provenance, JSON).
    attempts = db.table("attempts")
    for column in ("dispatched_at", "fence_intended_at", "claim", "provenance"):
        attempts.add_column(column, str)
    # Before m003 the intent was followed by the submit at once: any recorded attempt may
    # have been submitted, so it counts as dispatched (a lookup or a fence settles it).
    db.execute("UPDATE attempts SET dispatched_at = intended_at")
    # The adapter's typed request replaces the untyped options (and the digest kept twice);
    # the job's context (working directory, environment file) is recorded from now on.
    invocations = db.table("invocations")
    invocations.add_column("request", str)
    invocations.add_column("request_version", int)
    invocations.add_column("cwd", str)
    invocations.add_column("env_file", str)
    rows = db.execute("SELECT id, adapter, options, snapshot_digest FROM invocations").fetchall()
    for invocation_id, adapter, options, digest in rows:
        request = request_from_options(adapter, json.loads(options or "{}"), digest)
        db.execute(
            "UPDATE invocations SET request=?, request_version=1 WHERE id=?",
            (json.dumps(request, sort_keys=True), invocation_id),
        )
    invocations.transform(drop={"options", "snapshot_digest"}, not_null={"request"})


@migrations()
def m004_cluster_leases(db: Database) -> None:
    # Allocations vibesys holds itself (a SkyPilot cluster per campaign): one row per launch,
    # written like any other effect, intent first. `state` moves launching -> up -> releasing
    # -> released (or launching -> failed, up -> lost when the allocation ended under it);
    # `owner` is the live process carrying out a launch or release (reconcile leaves it alone),
    # `request` the adapter request that can inspect or release it, `evidence` a JSON list of
    # {at, state, text}: every step's raw observation.
    db.table("cluster_leases").create(
        {
            "id": int,
            "name": str,
            "campaign": str,
            "fingerprint": str,
            "profile": str,
            "adapter": str,
            "request": str,
            "state": str,
            "allocation_job": str,
            "owner": str,
            "owner_expires_at": str,
            "intended_at": str,
            "launched_at": str,
            "release_intended_at": str,
            "released_at": str,
            "updated_at": str,
            "evidence": str,
        },
        pk="id",
        not_null={
            "name",
            "fingerprint",
            "profile",
            "adapter",
            "request",
            "state",
            "intended_at",
            "updated_at",
            "evidence",
        },
    )
    db.table("cluster_leases").create_index(["name"])
    # At most one live lease per cluster name: a launch that finds one continues it.
    db.execute(
        "CREATE UNIQUE INDEX cluster_leases_live ON cluster_leases (name) "
        "WHERE state IN ('launching', 'up', 'releasing')"
    )
    # Which attempts ran on which lease (journal show, and what a release must not cut short).
    db.table("cluster_lease_uses").create(
        {"lease_id": int, "invocation_id": str, "attempt": int, "at": str},
        pk=("lease_id", "invocation_id", "attempt"),
        not_null={"at"},
        foreign_keys=[("lease_id", "cluster_leases", "id"), ("invocation_id", "invocations", "id")],
    )
    db.table("cluster_lease_uses").create_index(["invocation_id"])


@migrations()
def m005_shared_polls_leaner_commits(db: Database) -> None:
    # Fewer pages per transition. history and attempts become WITHOUT ROWID tables: the
    # primary key is the table, so an append or an update writes one b-tree, not a table and
    # its key index. attempts loses its unique index on job_name: the name is derived from the
    # primary key (`vibesys-<invocation>-<attempt>`) and nothing looks it up. The index on
    # invocations.state, rewritten by every transition, is replaced by a partial index of the
    # unfinished invocations keyed by creation: only creating an invocation and finishing it
    # touch it (outcome is set exactly when DONE is entered), and it is what `active()` reads.
    db.execute(
        """CREATE TABLE "history_new" (
   "invocation_id" TEXT NOT NULL REFERENCES "invocations"("id"),
   "seq" INTEGER NOT NULL,
   "from_state" TEXT NOT NULL,
   "to_state" TEXT NOT NULL,
   "event" TEXT NOT NULL,
   "evidence" TEXT NOT NULL,
   "at" TEXT NOT NULL,
   PRIMARY KEY ("invocation_id", "seq")
) WITHOUT ROWID"""
    )
    db.execute("INSERT INTO history_new SELECT * FROM history")
    db.execute("DROP TABLE history")
    db.execute('ALTER TABLE "history_new" RENAME TO "history"')
    for action in ("UPDATE", "DELETE"):
        db.execute(
            f"CREATE TRIGGER history_no_{action.lower()} BEFORE {action} ON history "
            "BEGIN SELECT RAISE(ABORT, 'history is append-only'); END"
        )
    db.execute(
        """CREATE TABLE "attempts_new" (
   "invocation_id" TEXT NOT NULL REFERENCES "invocations"("id"),
   "attempt" INTEGER NOT NULL,
   "job_name" TEXT NOT NULL,
   "job_id" TEXT,
   "failure_class" TEXT,
   "intended_at" TEXT NOT NULL,
   "submitted_at" TEXT,
   "dispatched_at" TEXT,
   "fence_intended_at" TEXT,
   "claim" TEXT,
   "provenance" TEXT,
   PRIMARY KEY ("invocation_id", "attempt")
) WITHOUT ROWID"""
    )
    db.execute(
        "INSERT INTO attempts_new SELECT invocation_id, attempt, job_name, job_id, failure_class,"
        " intended_at, submitted_at, dispatched_at, fence_intended_at, claim, provenance"
        " FROM attempts"
    )
    db.execute("DROP TABLE attempts")
    db.execute('ALTER TABLE "attempts_new" RENAME TO "attempts"')
    db.execute('DROP INDEX "idx_invocations_state"')
    db.execute(
        'CREATE INDEX "invocations_active" ON "invocations" ("created_at", "id") '
        "WHERE outcome IS NULL"
    )
    # One poll budget per site, shared by every process on this host (engine/shared_poll.py):
    # who runs the current round (a short lease), which round was last completed, when the
    # next one is due, and the site's facts read once (its RPC rate limits).
    db.execute(
        """CREATE TABLE "poll_sites" (
   "site" TEXT NOT NULL PRIMARY KEY,
   "round" INTEGER NOT NULL DEFAULT 0,
   "poller" TEXT,
   "poller_expires_at" TEXT,
   "started_at" TEXT,
   "finished_at" TEXT,
   "due_at" TEXT,
   "probed_at" TEXT,
   "facts" TEXT
) WITHOUT ROWID"""
    )
    # What each watched invocation's current attempt looked like in a round: the observation
    # as JSON, the round, and the (attempt, version) of the row the round was taken for. A
    # reader takes it only for the same attempt and version and a round it has not read yet.
    db.execute(
        """CREATE TABLE "poll_watch" (
   "site" TEXT NOT NULL,
   "invocation_id" TEXT NOT NULL REFERENCES "invocations"("id"),
   "attempt" INTEGER,
   "version" INTEGER,
   "round" INTEGER,
   "seen" TEXT,
   "observed_at" TEXT,
   PRIMARY KEY ("site", "invocation_id")
) WITHOUT ROWID"""
    )
