CREATE TABLE "_sqlite_migrations" (
   "id" INTEGER PRIMARY KEY,
   "migration_set" TEXT,
   "name" TEXT,
   "applied_at" TEXT
);
CREATE UNIQUE INDEX "idx__sqlite_migrations_migration_set_name"
    ON "_sqlite_migrations" ("migration_set", "name");
CREATE TABLE "spool" (
   "invocation_id" TEXT REFERENCES "invocations"("id"),
   "attempt" INTEGER,
   "stream" TEXT,
   "offset" INTEGER NOT NULL,
   "updated_at" TEXT NOT NULL,
   PRIMARY KEY ("invocation_id", "attempt", "stream")
);
CREATE TABLE "artifacts" (
   "invocation_id" TEXT REFERENCES "invocations"("id"),
   "attempt" INTEGER,
   "path" TEXT,
   "size" INTEGER,
   "sha256" TEXT,
   "state" TEXT NOT NULL,
   "local_path" TEXT,
   "detail" TEXT,
   "updated_at" TEXT NOT NULL,
   PRIMARY KEY ("invocation_id", "attempt", "path")
);
CREATE TABLE "invocations" (
   "id" TEXT PRIMARY KEY,
   "label" TEXT,
   "adapter" TEXT NOT NULL,
   "command" TEXT NOT NULL,
   "state" TEXT NOT NULL,
   "version" INTEGER NOT NULL,
   "attempt" INTEGER NOT NULL DEFAULT '0',
   "max_retries" INTEGER NOT NULL,
   "retries" INTEGER NOT NULL DEFAULT '0',
   "outcome" TEXT,
   "exit_code" INTEGER,
   "failure_class" TEXT,
   "cancel_requested" INTEGER NOT NULL DEFAULT '0',
   "not_before" TEXT,
   "invocation_dir" TEXT NOT NULL,
   "created_at" TEXT NOT NULL,
   "updated_at" TEXT NOT NULL,
   "lease_owner" TEXT,
   "lease_expires_at" TEXT,
   "request" TEXT NOT NULL,
   "request_version" INTEGER,
   "cwd" TEXT,
   "env_file" TEXT
, "settings" TEXT, "site_digest" TEXT);
CREATE TABLE "cluster_leases" (
   "id" INTEGER PRIMARY KEY,
   "name" TEXT NOT NULL,
   "campaign" TEXT,
   "fingerprint" TEXT NOT NULL,
   "profile" TEXT NOT NULL,
   "adapter" TEXT NOT NULL,
   "request" TEXT NOT NULL,
   "state" TEXT NOT NULL,
   "allocation_job" TEXT,
   "owner" TEXT,
   "owner_expires_at" TEXT,
   "intended_at" TEXT NOT NULL,
   "launched_at" TEXT,
   "release_intended_at" TEXT,
   "released_at" TEXT,
   "updated_at" TEXT NOT NULL,
   "evidence" TEXT NOT NULL
, "site_digest" TEXT);
CREATE INDEX "idx_cluster_leases_name"
    ON "cluster_leases" ("name");
CREATE UNIQUE INDEX cluster_leases_live ON cluster_leases (name) WHERE state IN ('launching', 'up', 'releasing');
CREATE TABLE "cluster_lease_uses" (
   "lease_id" INTEGER REFERENCES "cluster_leases"("id"),
   "invocation_id" TEXT REFERENCES "invocations"("id"),
   "attempt" INTEGER,
   "at" TEXT NOT NULL,
   PRIMARY KEY ("lease_id", "invocation_id", "attempt")
);
CREATE INDEX "idx_cluster_lease_uses_invocation_id"
    ON "cluster_lease_uses" ("invocation_id");
CREATE TABLE "history" (
   "invocation_id" TEXT NOT NULL REFERENCES "invocations"("id"),
   "seq" INTEGER NOT NULL,
   "from_state" TEXT NOT NULL,
   "to_state" TEXT NOT NULL,
   "event" TEXT NOT NULL,
   "evidence" TEXT NOT NULL,
   "at" TEXT NOT NULL,
   PRIMARY KEY ("invocation_id", "seq")
) WITHOUT ROWID;
CREATE TRIGGER history_no_update BEFORE UPDATE ON history BEGIN SELECT RAISE(ABORT, 'history is append-only'); END;
CREATE TRIGGER history_no_delete BEFORE DELETE ON history BEGIN SELECT RAISE(ABORT, 'history is append-only'); END;
CREATE TABLE "attempts" (
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
   "provenance" TEXT, "unreachable_since" TEXT,
   PRIMARY KEY ("invocation_id", "attempt")
) WITHOUT ROWID;
CREATE INDEX "invocations_active" ON "invocations" ("created_at", "id") WHERE outcome IS NULL;
CREATE TABLE "poll_sites" (
   "site" TEXT NOT NULL PRIMARY KEY,
   "round" INTEGER NOT NULL DEFAULT 0,
   "poller" TEXT,
   "poller_expires_at" TEXT,
   "started_at" TEXT,
   "finished_at" TEXT,
   "due_at" TEXT,
   "probed_at" TEXT,
   "facts" TEXT
, "ends_found" INTEGER NOT NULL DEFAULT 0, "ends_first_at" TEXT, "settle_due_at" TEXT) WITHOUT ROWID;
CREATE TABLE "poll_watch" (
   "site" TEXT NOT NULL,
   "invocation_id" TEXT NOT NULL REFERENCES "invocations"("id"),
   "attempt" INTEGER,
   "version" INTEGER,
   "round" INTEGER,
   "seen" TEXT,
   "observed_at" TEXT,
   PRIMARY KEY ("site", "invocation_id")
) WITHOUT ROWID;
CREATE TABLE "site_configs" (
   "digest" TEXT NOT NULL PRIMARY KEY,
   "kind" TEXT NOT NULL,
   "rendering" TEXT NOT NULL,
   "recorded_at" TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE "run_slots" (
   "ticket" INTEGER PRIMARY KEY AUTOINCREMENT,
   "run_id" TEXT NOT NULL,
   "owner" TEXT NOT NULL,
   "state" TEXT NOT NULL,
   "invocation_id" TEXT,
   "queued_at" TEXT NOT NULL,
   "active_at" TEXT
);
CREATE TABLE sqlite_sequence(name,seq);
CREATE INDEX "run_slots_run" ON "run_slots" ("run_id", "state", "ticket");
CREATE TABLE "bridge_requests" (
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
) WITHOUT ROWID;
CREATE UNIQUE INDEX "bridge_requests_invocation" ON "bridge_requests" ("invocation_id");
CREATE TABLE "campaign_queue" (
   "seq" INTEGER PRIMARY KEY AUTOINCREMENT,
   "campaign" TEXT NOT NULL,
   "invocation_id" TEXT NOT NULL UNIQUE,
   "joined_at" TEXT NOT NULL
);
CREATE INDEX "campaign_queue_campaign" ON "campaign_queue" ("campaign", "seq");
CREATE INDEX "invocations_adapter" ON "invocations" ("adapter", "id");
CREATE INDEX "invocations_created" ON "invocations" ("created_at", "id");
CREATE INDEX "invocations_label" ON "invocations" ("label", "id");
CREATE INDEX "invocations_campaign" ON "invocations" (json_extract(request, '$.run_id'), id);
