"""The names of the schema steps this code knows, as plain data: reading a journal checks them
without importing sqlite-utils. `migrations.py` defines the steps and fails at import when the
two lists disagree."""

from __future__ import annotations

from typing import Final

MIGRATION_SET: Final = "vibesys"

#: Every step in `migrations.py`, in order. Add the next one here too.
STEPS: Final = (
    "m001_invocations_attempts_history",
    "m002_spool_artifacts_snapshot",
    "m003_typed_requests_fences_context",
    "m004_cluster_leases",
    "m005_shared_polls_leaner_commits",
    "m006_settings_unreachable_since",
    "m007_site_configs_run_slots",
    "m010_bridge_requests",
    "m011_campaign_queue",
    "m012_invocation_dir",
    "m013_poll_settle",
    "m014_invocation_filter_indexes",
)
KNOWN: Final = frozenset(STEPS)
