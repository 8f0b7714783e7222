"""The mutation check's framework: the files the mutants change, the tests run against each
file's mutants unless a mutant names its own (TESTS_FOR), and the Mutant itself (`M` for
short in the lists of mutants)."""

from __future__ import annotations

import msgspec

PARSE = "vibesys/adapters/slurm/parse.py"
RENDER = "vibesys/cli/render.py"
EXITS = "vibesys/states/exits.py"
STORE = "vibesys/journal_schema/store.py"
JOURNAL_FILE = "vibesys/journal_schema/journal_file.py"
LEASES = "vibesys/journal_schema/leases.py"
TABLE = "vibesys/states/table.py"
JOB_STATE = "vibesys/states/job_state.py"
PLAN = "vibesys/engine/plan.py"
OBSERVATION = "vibesys/engine/observation.py"
OBSERVE = "vibesys/engine/observe.py"
EXECUTE = "vibesys/engine/execute.py"
SKY = "vibesys/adapters/skypilot/classify.py"
CLUSTERS = "vibesys/engine/clusters.py"
CLUSTER_RECORDS = "vibesys/journal_schema/clusters.py"
SHARED_POLL = "vibesys/engine/shared_poll.py"
POLLS = "vibesys/journal_schema/polls.py"
MACHINE = "vibesys/states/machine.py"
LEASE_TABLE = "vibesys/states/lease_table.py"
RUN_COMMAND = "vibesys/cli/run_command.py"
CORE = "vibesys/engine/core.py"
CONTEXT = "vibesys/engine/context.py"
ADAPTER_ACCESS = "vibesys/engine/adapter_access.py"
STATUS_RULES = "vibesys/adapters/slurm/status_rules.py"
JOB_RESULT = "vibesys/job_result/__init__.py"
JOB_RESULT_MODEL = "vibesys/job_result/model.py"
BRIDGE_PROTOCOL = "vibesys/bridge/protocol.py"
BRIDGE_ADMISSION = "vibesys/bridge/admission.py"
BRIDGE_RECORDED = "vibesys/bridge/recorded.py"
BRIDGE_FOLLOW = "vibesys/bridge/follow.py"
BRIDGE_ROWS = "vibesys/journal_schema/recorded_evaluations.py"
EVAL_CLIENT = "vibesys/bridge/client.py"
BRIDGE_SESSION = "vibesys/bridge/session.py"
SERVICE_SERVER = "vibesys/service/server.py"
CLIENT_KEYS = "vibesys/invocation/keys.py"
CONNECTIONS = "vibesys/service/connections.py"
TOKENS = "vibesys/service/tokens.py"
CHECK_MODEL = "vibesys/sitecheck/model.py"
CHECK_RUNNER = "vibesys/sitecheck/runner.py"
CHECK_CERT = "vibesys/sitecheck/certificate.py"
CHECK_JOB = "vibesys/sitecheck/slurm_job.py"
UI_READER = "vibesys/ui/reader.py"
UI_APP = "vibesys/ui/app.py"
UI_QUERIES = "vibesys/ui/queries.py"
UI_LOGS = "vibesys/ui/logs.py"
UI_DIAGRAM = "vibesys/ui/diagram.py"
UI_PAGE = "vibesys/ui/templates/invocation.html"
UI_DRIVER = "vibesys/ui/driver.py"
UI_EVENTS = "vibesys/ui/events.py"
REQUESTS = "vibesys/adapters/requests.py"
SLURM_REQUEST = "vibesys/adapters/slurm/request.py"
SKY_REQUEST = "vibesys/adapters/skypilot/request.py"
SKY_STAGED = "vibesys/adapters/skypilot/staged.py"
SKY_OPS = "vibesys/adapters/skypilot/ops.py"
SKY_ALLOCATION_END = "vibesys/adapters/skypilot/allocation_end.py"
BRIDGE_SITE = "vibesys/bridge/site.py"
BRIDGE_FILES = "vibesys/bridge/files.py"
ARTIFACT_WALK = "vibesys/osutil/artifact_walk.py"
SITE_FILE = "vibesys/config/slurm_file.py"
TRUSTED = "vibesys/config/sizing.py"
SLOTS = "vibesys/journal_schema/slots.py"
RUN_SLOTS = "vibesys/broker/run_slots.py"
ROWS = "vibesys/journal_schema/rows.py"
RECORDS = "vibesys/engine/records.py"
CHAINS = "vibesys/engine/chains.py"
DRIVE = "vibesys/engine/drive.py"
RECONCILE = "vibesys/engine/reconcile.py"
SETTINGS = "vibesys/journal_schema/settings.py"
SCRIPT = "vibesys/adapters/slurm/script.py"
LIMITS = "vibesys/adapters/slurm/limits.py"
SBATCH = "vibesys/adapters/slurm/sbatch.py"
SKY_LIMITS_CLI = ("tests/test_cli_skypilot_limits.py",)
LOCAL = "vibesys/adapters/local.py"
MARKERS = "vibesys/adapters/rundir/markers.py"
SKY_RUN_DIRS = "vibesys/adapters/skypilot/run_dirs.py"
MARKERS_TESTS = ("tests/adapters/test_rundir_markers.py",)
CLI = "vibesys/cli/app.py"
RECORDED = ("tests/engine/test_recorded_settings.py",)
CHAINED = ("tests/engine/test_chains.py",)
FAULTS = "tests/test_journal_faults.py"
QUEUE_ENGINE = "tests/engine/skypilot/test_campaign_queue.py::test_one_evaluation_at_a_time_per_campaign_the_others_wait_in_order"
QUEUE_CLI = "tests/test_campaign_queue_cli.py"

#: The tests run against a mutant of each file unless the mutant says otherwise.
TESTS_FOR: dict[str, tuple[str, ...]] = {
    PARSE: (
        "tests/adapters/test_slurm_parse_output.py",
        "tests/adapters/test_slurm_classify.py",
        "tests/adapters/test_slurm_classify_oracles.py",
    ),
    RENDER: ("tests/test_render.py",),
    EXITS: ("tests/test_render.py",),
    STORE: (
        "tests/journal_schema/test_journal_store.py",
        "tests/journal_schema/test_journal_concurrency.py",
        "tests/journal_schema/test_journal_golden.py",
    ),
    LEASES: ("tests/journal_schema/test_journal_leases.py",),
    TABLE: ("tests/states",),
    JOB_STATE: ("tests/states",),
    PLAN: (
        "tests/engine/test_plan_answers.py",
        "tests/engine/test_fences.py",
        "tests/engine/test_engine_fake.py",
        "tests/crash/test_every_failpoint.py",
        "tests/test_docs.py::test_generated_docs_are_fresh",
    ),
    OBSERVE: (
        "tests/engine/test_engine_fake.py",
        "tests/engine/test_fences.py",
        "tests/crash/test_every_failpoint.py",
    ),
    EXECUTE: ("tests/engine/test_fences.py", "tests/engine/test_engine_fake.py"),
    SKY: ("tests/adapters/skypilot/test_classify.py",),
    CLUSTERS: ("tests/engine/test_cluster_leases.py", "tests/engine/skypilot"),
    CLUSTER_RECORDS: ("tests/engine/test_cluster_leases.py",),
    SHARED_POLL: ("tests/engine/shared_poll",),
    POLLS: ("tests/engine/shared_poll",),
    MACHINE: ("tests/states/test_states_decide.py",),
    LEASE_TABLE: ("tests/states/test_lease_table.py", "tests/engine/test_cluster_leases.py"),
    RUN_COMMAND: ("tests/test_live_status.py",),
    CORE: ("tests/engine/shared_poll",),
    OBSERVATION: ("tests/engine/shared_poll",),
    CONTEXT: ("tests/engine/test_engine_fake.py",),
    ADAPTER_ACCESS: ("tests/engine/test_engine_fake.py",),
    STATUS_RULES: (
        "tests/adapters/test_rundir_markers.py",
        "tests/adapters/test_slurm_claimed_elsewhere.py",
    ),
    JOB_RESULT: ("tests/test_job_result.py",),
    JOB_RESULT_MODEL: ("tests/test_job_result.py",),
    BRIDGE_PROTOCOL: ("tests/bridge/test_protocol.py",),
    BRIDGE_ADMISSION: ("tests/bridge/test_admission.py",),
    BRIDGE_RECORDED: ("tests/bridge/test_server.py",),
    BRIDGE_FOLLOW: ("tests/bridge/test_server.py",),
    BRIDGE_ROWS: ("tests/bridge/test_recorded_evaluations.py",),
    BRIDGE_SESSION: ("tests/bridge/test_session_restart.py",),
    CLIENT_KEYS: ("tests/client",),
    EVAL_CLIENT: (
        "tests/bridge/test_session.py::test_a_bridge_killed_while_it_runs_is_restarted_and_reattaches",
    ),
    TOKENS: ("tests/bridge/test_admission.py",),
    CONNECTIONS: ("tests/bridge/test_starving.py",),
    SERVICE_SERVER: (
        "tests/bridge/test_starving.py::test_a_stopped_bridge_is_noticed_by_its_missing_heartbeats",
    ),
    CHECK_MODEL: ("tests/sitecheck/test_model.py",),
    CHECK_RUNNER: ("tests/sitecheck/test_runner.py",),
    CHECK_CERT: ("tests/sitecheck/test_certificate.py",),
    CHECK_JOB: ("tests/sitecheck/test_slurm_pieces.py",),
    UI_READER: ("tests/ui/test_reader.py",),
    UI_APP: ("tests/ui/test_app.py",),
    UI_QUERIES: ("tests/ui/test_app.py", "tests/ui/test_filters.py"),
    UI_LOGS: ("tests/ui/test_parts.py",),
    UI_DIAGRAM: ("tests/ui/test_parts.py",),
    UI_PAGE: ("tests/ui/test_app.py",),
    UI_DRIVER: ("tests/ui/test_driver.py",),
    UI_EVENTS: ("tests/ui/test_driver.py", "tests/ui/test_events.py"),
    SITE_FILE: ("tests/config/test_slurm_file.py",),
    TRUSTED: ("tests/config/test_slurm_file.py", "tests/test_cli_site.py"),
    SLURM_REQUEST: ("tests/config/test_slurm_file.py", "tests/test_cli_site.py"),
    SKY_REQUEST: ("tests/config/test_resources_profiles.py",),
    SKY_STAGED: ("tests/engine/test_skypilot_candidate.py",),
    SKY_OPS: ("tests/adapters/skypilot/test_backend_fake.py",),
    SKY_ALLOCATION_END: (
        "tests/adapters/skypilot/test_allocation_end.py",
        "tests/engine/skypilot/test_preemption.py",
    ),
    BRIDGE_SITE: ("tests/bridge/test_site.py",),
    BRIDGE_FILES: ("tests/bridge/test_files.py",),
    ARTIFACT_WALK: ("tests/osutil/test_artifact_walk.py",),
    SLOTS: ("tests/broker/test_run_slots.py",),
    RUN_SLOTS: ("tests/broker/test_run_slots.py",),
    ROWS: ("tests/test_cli_site.py",),
    REQUESTS: ("tests/test_cli_site.py", "tests/config/test_resources_profiles.py"),
    RECORDS: RECORDED,
    CHAINS: CHAINED,
    DRIVE: RECORDED,
    RECONCILE: RECORDED,
    SETTINGS: ("tests/journal_schema/test_settings.py",),
    SCRIPT: ("tests/adapters/test_slurm_script.py",),
    LIMITS: ("tests/adapters/test_slurm_limits.py", "tests/adapters/test_sbatch_limits.py"),
    SBATCH: ("tests/adapters/test_sbatch_limits.py",),
    LOCAL: ("tests/adapters/test_local.py",),
    MARKERS: MARKERS_TESTS,
    SKY_RUN_DIRS: MARKERS_TESTS,
}


class Mutant(msgspec.Struct, frozen=True):
    name: str
    file: str
    original: str
    replacement: str
    why: str
    tests: tuple[str, ...] = ()
    equivalent: str = ""

    def test_args(self) -> tuple[str, ...]:
        return self.tests or TESTS_FOR[self.file]


M = Mutant
