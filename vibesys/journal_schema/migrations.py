"""Append-only schema migrations. Never edit a released step; add the next one.

sqlite-utils records each applied step in `_sqlite_migrations` in the same transaction as the
step itself. A journal that lists a step this code does not know was written by a newer
vibesys and is refused (see opening.open_database).
"""

from __future__ import annotations

import json

from sqlite_utils import Database

from vibesys.journal_schema.first_migrations import migrations
from vibesys.journal_schema.schema_steps import MIGRATION_SET, STEPS

__all__ = ["KNOWN", "MIGRATION_SET", "migrations"]


#: What every process but the driver used before m006 (the driver's own values were never
#: recorded): the settings an older invocation is carried on with from now on.
M006_SETTINGS = {
    "retry_delay_seconds": 2.0,
    "retry_backoff": 2.0,
    "retry_max_delay_seconds": 300.0,
    "unreachable_timeout_seconds": 600.0,
}


@migrations()
def m006_settings_unreachable_since(db: Database) -> None:
    # How the invocation is carried on (retry delays, the unreachable timeout, whether reconcile
    # cancels it once its client is gone), recorded at PREPARED as a JSON object, so that every
    # process that carries it on uses the values it was started with. `cancel_when_orphaned`
    # moves here from the adapter's request.
    db.table("invocations").add_column("settings", str)
    # The first observation of the attempt's scheduler as unreachable (cleared by one that
    # reaches it): the unreachable timeout counts from here, whoever looks.
    db.execute('ALTER TABLE "attempts" ADD COLUMN "unreachable_since" TEXT')
    rows = db.execute("SELECT id, request FROM invocations").fetchall()
    for invocation_id, text in rows:
        request = json.loads(text)
        orphaned = bool(request.pop("cancel_when_orphaned", False))
        settings = {**M006_SETTINGS, "cancel_when_orphaned": orphaned}
        db.execute(
            "UPDATE invocations SET settings=?, request=? WHERE id=?",
            (
                json.dumps(settings, sort_keys=True),
                json.dumps(request, sort_keys=True),
                invocation_id,
            ),
        )


@migrations()
def m007_site_configs_run_slots(db: Database) -> None:
    # The site configuration each invocation runs with, recorded at PREPARED: its canonical
    # rendering (slurm.toml, or the SkyPilot profile), once per digest (sha256 of the text),
    # named by the invocation (and by a cluster lease, which must be inspected and released
    # with the same site). Invocations recorded before have no digest.
    db.execute(
        """CREATE TABLE "site_configs" (
   "digest" TEXT NOT NULL PRIMARY KEY,
   "kind" TEXT NOT NULL,
   "rendering" TEXT NOT NULL,
   "recorded_at" TEXT NOT NULL
) WITHOUT ROWID"""
    )
    db.table("invocations").add_column("site_digest", str)
    db.table("cluster_leases").add_column("site_digest", str)
    # One concurrency cap per run (`max_concurrent_jobs`), across every broker of the run
    # that shares this journal: a ticket per command, first come first served (tickets only
    # grow), `active` from before its submission until its job has left the scheduler. A row
    # whose owner (host:pid:start of its broker) died is given back once nothing of its job
    # can still be in the scheduler.
    db.execute(
        """CREATE TABLE "run_slots" (
   "ticket" INTEGER PRIMARY KEY AUTOINCREMENT,
   "run_id" TEXT NOT NULL,
   "owner" TEXT NOT NULL,
   "state" TEXT NOT NULL,
   "invocation_id" TEXT,
   "queued_at" TEXT NOT NULL,
   "active_at" TEXT
)"""
    )
    db.execute('CREATE INDEX "run_slots_run" ON "run_slots" ("run_id", "state", "ticket")')


@migrations()
def m010_bridge_requests(db: Database) -> None:
    # The evaluation bridge's idempotency keys: a helper's request id, within its campaign
    # (run id), names exactly one invocation. The row is committed before the invocation is
    # recorded (its id chosen first), so a retried request, after a dropped connection or a
    # restarted bridge, finds the same invocation and never starts a second one. `body` is
    # the request as its identity (JSON, without the token, the variables' values or the
    # output offsets); `uid` the peer that sent it first.
    db.execute(
        """CREATE TABLE "bridge_requests" (
   "run_id" TEXT NOT NULL,
   "request_id" TEXT NOT NULL,
   "invocation_id" TEXT NOT NULL,
   "uid" INTEGER NOT NULL,
   "workspace" TEXT NOT NULL,
   "kind" TEXT NOT NULL,
   "body" TEXT NOT NULL,
   "results_dir" TEXT,
   "created_at" TEXT NOT NULL,
   PRIMARY KEY ("run_id", "request_id")
) WITHOUT ROWID"""
    )
    db.execute(
        'CREATE UNIQUE INDEX "bridge_requests_invocation" ON "bridge_requests" ("invocation_id")'
    )


@migrations()
def m011_campaign_queue(db: Database) -> None:
    # One evaluation at a time per campaign: an invocation of a campaign joins its queue when
    # it is recorded (PREPARED, in the same transaction), and is submitted only once every
    # invocation that joined before it is DONE. `seq` only grows, so the order survives any
    # restart; an invocation leaves the queue by ending (its row stays, as history).
    db.execute(
        """CREATE TABLE "campaign_queue" (
   "seq" INTEGER PRIMARY KEY AUTOINCREMENT,
   "campaign" TEXT NOT NULL,
   "invocation_id" TEXT NOT NULL UNIQUE,
   "joined_at" TEXT NOT NULL
)"""
    )
    db.execute('CREATE INDEX "campaign_queue_campaign" ON "campaign_queue" ("campaign", "seq")')


@migrations()
def m012_invocation_dir(db: Database) -> None:
    # The invocation's local directory, named as in the code (`invocation_dir`, distinct from
    # an attempt's local and remote directories). SQLite renames the column in place (and in
    # every index, trigger and view that names it); no row changes.
    db.execute('ALTER TABLE "invocations" RENAME COLUMN "run_dir" TO "invocation_dir"')


@migrations()
def m013_poll_settle(db: Database) -> None:
    # The round that confirms ends found by probes waits until they stop coming (or a cap
    # after the first): how many a probe found since the last round, when the first was found,
    # and the round those ends ask for, kept apart from `due_at` so that waiting for more ends
    # never puts off a round the schedule or a cancel asked for.
    db.execute('ALTER TABLE "poll_sites" ADD COLUMN "ends_found" INTEGER NOT NULL DEFAULT 0')
    db.execute('ALTER TABLE "poll_sites" ADD COLUMN "ends_first_at" TEXT')
    db.execute('ALTER TABLE "poll_sites" ADD COLUMN "settle_due_at" TEXT')


@migrations()
def m014_invocation_filter_indexes(db: Database) -> None:
    # What the web view's filters read (`vibesys ui`): the count of a filter's invocations
    # and the ids of its page come from these alone, not from a scan of every row (each holds
    # its request and settings). The columns never change once recorded, so a transition's
    # commit writes none of them.
    db.execute('CREATE INDEX "invocations_adapter" ON "invocations" ("adapter", "id")')
    db.execute('CREATE INDEX "invocations_created" ON "invocations" ("created_at", "id")')
    db.execute('CREATE INDEX "invocations_label" ON "invocations" ("label", "id")')
    # A SkyPilot campaign's invocations, by the run id in their request (which never changes).
    db.execute(
        'CREATE INDEX "invocations_campaign" ON "invocations" '
        "(json_extract(request, '$.run_id'), id)"
    )


KNOWN = frozenset(m.name for m in migrations._migrations)
if tuple(m.name for m in migrations._migrations) != STEPS:
    raise AssertionError("schema_steps.STEPS must list the migrations above, in order")
