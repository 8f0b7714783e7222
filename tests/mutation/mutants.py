"""Named mutants of the contract modules: each is a plausible regression the suite must catch.

A mutant is one exact text replacement in one file (the text must occur exactly once) and a
line saying which regression it stands for. Adding one is one line in MUTANTS. `tests` chooses
which tests run against it (default: TESTS_FOR[file]); `equivalent` gives the reason when a
mutant cannot change behaviour (it must then survive, or the list is wrong).

Run them with `scripts/mutants` (see tests/mutation/run.py).
"""

from __future__ import annotations

from dataclasses import dataclass

PARSE = "vibesys/adapters/slurm/parse.py"
RENDER = "vibesys/cli/render.py"
EXITS = "vibesys/states/exits.py"
STORE = "vibesys/journal_schema/store.py"
LEASES = "vibesys/journal_schema/leases.py"
TABLE = "vibesys/states/table.py"
JOB_STATE = "vibesys/states/job_state.py"
PLAN = "vibesys/engine/plan.py"
OBSERVE = "vibesys/engine/observe.py"
EXECUTE = "vibesys/engine/execute.py"
SKY = "vibesys/adapters/skypilot/classify.py"
CLUSTERS = "vibesys/engine/clusters.py"
CLUSTER_RECORDS = "vibesys/journal_schema/clusters.py"
PROVENANCE = "vibesys/engine/provenance.py"
SHARED_POLL = "vibesys/engine/shared_poll.py"
POLLS = "vibesys/journal_schema/polls.py"
MACHINE = "vibesys/states/machine.py"
LEASE_TABLE = "vibesys/states/lease_table.py"
RUN_COMMAND = "vibesys/cli/run_command.py"
CORE = "vibesys/engine/core.py"
PREPARE = "vibesys/engine/prepare.py"
ADAPTER_ACCESS = "vibesys/engine/adapter_access.py"
STATUS_RULES = "vibesys/adapters/slurm/status_rules.py"
JOB_RESULT = "vibesys/job_result/__init__.py"
JOB_RESULT_MODEL = "vibesys/job_result/model.py"
BRIDGE_PROTOCOL = "vibesys/bridge/protocol.py"
BRIDGE_ADMISSION = "vibesys/bridge/admission.py"
BRIDGE_RUNNER = "vibesys/bridge/runner.py"
BRIDGE_FOLLOW = "vibesys/bridge/follow.py"
BRIDGE_ROWS = "vibesys/journal_schema/bridge_requests.py"
EVAL_CLIENT = "vibesys/bridge/client.py"
TOKENS = "vibesys/osutil/tokens.py"
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
REQUESTS = "vibesys/adapters/requests.py"
SLURM_REQUEST = "vibesys/adapters/slurm/request.py"
SKY_REQUEST = "vibesys/adapters/skypilot/request.py"
SKY_STAGED = "vibesys/adapters/skypilot/staged.py"
SKY_OPS = "vibesys/adapters/skypilot/ops.py"
BRIDGE_SITE = "vibesys/bridge/site.py"
BRIDGE_FILES = "vibesys/bridge/files.py"
SITE_FILE = "vibesys/config/slurm_file.py"
TRUSTED = "vibesys/config/request.py"
SLOTS = "vibesys/journal_schema/slots.py"
RUN_SLOTS = "vibesys/broker/run_slots.py"
ROWS = "vibesys/journal_schema/rows.py"
OUTAGE = "vibesys/engine/outage.py"
CHAINS = "vibesys/engine/chains.py"
DRIVE = "vibesys/engine/drive.py"
RECONCILE = "vibesys/engine/reconcile.py"
SETTINGS = "vibesys/journal_schema/settings.py"
SCRIPT = "vibesys/adapters/slurm/script.py"
LOCAL = "vibesys/adapters/local.py"
MARKERS = "vibesys/adapters/rundir/markers.py"
SKY_RUN_DIRS = "vibesys/adapters/rundir/remote.py"
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
    PROVENANCE: ("tests/engine/skypilot",),
    SHARED_POLL: ("tests/engine/shared_poll",),
    POLLS: ("tests/engine/shared_poll",),
    MACHINE: ("tests/states/test_states_decide.py",),
    LEASE_TABLE: ("tests/states/test_lease_table.py", "tests/engine/test_cluster_leases.py"),
    RUN_COMMAND: ("tests/test_live_status.py",),
    CORE: ("tests/engine/shared_poll",),
    PREPARE: ("tests/engine/test_engine_fake.py",),
    ADAPTER_ACCESS: ("tests/engine/test_engine_fake.py",),
    STATUS_RULES: (
        "tests/adapters/test_rundir_markers.py",
        "tests/adapters/test_slurm_claimed_elsewhere.py",
    ),
    JOB_RESULT: ("tests/test_job_result.py",),
    JOB_RESULT_MODEL: ("tests/test_job_result.py",),
    BRIDGE_PROTOCOL: ("tests/bridge/test_protocol.py",),
    BRIDGE_ADMISSION: ("tests/bridge/test_admission.py",),
    BRIDGE_RUNNER: ("tests/bridge/test_server.py",),
    BRIDGE_FOLLOW: ("tests/bridge/test_server.py",),
    BRIDGE_ROWS: ("tests/bridge/test_request_rows.py",),
    EVAL_CLIENT: (
        "tests/bridge/test_session.py::test_a_bridge_killed_while_it_runs_is_restarted_and_reattaches",
    ),
    TOKENS: ("tests/bridge/test_admission.py",),
    CHECK_MODEL: ("tests/sitecheck/test_model.py",),
    CHECK_RUNNER: ("tests/sitecheck/test_runner.py",),
    CHECK_CERT: ("tests/sitecheck/test_certificate.py",),
    CHECK_JOB: ("tests/sitecheck/test_slurm_pieces.py",),
    UI_READER: ("tests/ui/test_reader.py",),
    UI_APP: ("tests/ui/test_app.py",),
    UI_QUERIES: ("tests/ui/test_app.py",),
    UI_LOGS: ("tests/ui/test_parts.py",),
    UI_DIAGRAM: ("tests/ui/test_parts.py",),
    UI_PAGE: ("tests/ui/test_app.py",),
    SITE_FILE: ("tests/config/test_slurm_file.py",),
    TRUSTED: ("tests/config/test_slurm_file.py", "tests/test_cli_site.py"),
    SLURM_REQUEST: ("tests/config/test_slurm_file.py", "tests/test_cli_site.py"),
    SKY_REQUEST: ("tests/config/test_resources_profiles.py",),
    SKY_STAGED: ("tests/engine/test_skypilot_candidate.py",),
    SKY_OPS: ("tests/adapters/skypilot/test_backend_fake.py",),
    BRIDGE_SITE: ("tests/bridge/test_site.py",),
    BRIDGE_FILES: ("tests/bridge/test_files.py",),
    SLOTS: ("tests/broker/test_run_slots.py",),
    RUN_SLOTS: ("tests/broker/test_run_slots.py",),
    ROWS: ("tests/test_cli_site.py",),
    REQUESTS: ("tests/test_cli_site.py", "tests/config/test_resources_profiles.py"),
    OUTAGE: RECORDED,
    CHAINS: CHAINED,
    DRIVE: RECORDED,
    RECONCILE: RECORDED,
    SETTINGS: ("tests/journal_schema/test_settings.py",),
    SCRIPT: ("tests/adapters/test_slurm_script.py",),
    LOCAL: ("tests/adapters/test_local.py",),
    MARKERS: MARKERS_TESTS,
    SKY_RUN_DIRS: MARKERS_TESTS,
}


@dataclass(frozen=True)
class Mutant:
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
# One mutant per line, however long: (name, file, original, replacement, why, ...).
# fmt: off
MUTANTS: list[Mutant] = [
    # -- Slurm classification ----------------------------------------------------------------
    # -- the state machine (the oracle in tests/states is written out by hand) ---------------
    M("table-unresolved-cannot-reattach", TABLE, '"source": [S.SUBMITTING, S.UNRESOLVED],\n        "dest": S.RUNNING,', '"source": [S.SUBMITTING],\n        "dest": S.RUNNING,', "an UNRESOLVED job found running can never be followed again"),
    M("table-fence-from-running", TABLE, '"source": [S.SUBMITTING, S.UNRESOLVED],\n        "dest": None,\n        "after": "emit_fence",', '"source": [S.SUBMITTING, S.RUNNING, S.UNRESOLVED],\n        "dest": None,\n        "after": "emit_fence",', "a running job's attempt could be fenced out from under it"),
    M("table-dispatch-skips-submit", TABLE, '"after": "emit_submit"}', '"after": "emit_poll"}', "the dispatch no longer authorizes the submit"),
    M("table-misconfigured-from-running", TABLE, '"source": [S.PREPARED, S.SUBMITTING],\n        "dest": S.DONE,\n        "after": "emit_finish",\n    },\n    # The invocation it runs after', '"source": [S.PREPARED, S.SUBMITTING, S.RUNNING],\n        "dest": S.DONE,\n        "after": "emit_finish",\n    },\n    # The invocation it runs after', "a job that may run is ended DONE on a configuration error"),
    M("retryable-application-failure", JOB_STATE, "        FailureClass.TRANSPORT_LOST,\n    }", "        FailureClass.TRANSPORT_LOST,\n        FailureClass.APPLICATION_FAILED,\n    }", "an application failure is retried blindly"),
    M("outcome-cancelled-is-completed", JOB_STATE, "FailureClass.CANCELLED: Outcome.CANCELLED,", "FailureClass.CANCELLED: Outcome.COMPLETED,", "a cancelled job reports success"),
    # -- the planner -------------------------------------------------------------------------
    M("plan-silence-is-absence", PLAN, "            return Commit(FenceIntended(inv.attempt))", "            return _fenced(inv, seen, ctx)", "an attempt nobody sees is called dead without a fence (the double run)"),
    M("plan-redispatch", PLAN, "        case JobState.SUBMITTING:\n            return _unsettled(inv, _need(seen), ctx)", "        case JobState.SUBMITTING:\n            return Commit(SubmitDispatched(inv.attempt, inv.attempt_job_name(inv.attempt)))", "an attempt whose submit may have happened is submitted again", tests=("tests/engine/test_fences.py", "tests/engine/test_plan_execute.py")),
    M("plan-fence-ignored", PLAN, "        case Sight.FENCED:\n            return _fenced(inv, seen, ctx)\n        case Sight.ABSENT:", "        case Sight.ABSENT:", "a fence that won is never acted on: the invocation hangs"),
    M("plan-unknown-while-running-holds", PLAN, '    return Commit(OutcomeUnknown(f"{seen.sight}: {seen.evidence}"))\n\n\ndef _ended', '    return Hold(f"{seen.sight}: {seen.evidence}")\n\n\ndef _ended', "a running job the scheduler lost is never marked UNRESOLVED", tests=("tests/engine/test_engine_fake.py", "tests/engine/test_plan_execute.py")),
    M("plan-no-unreachable-timeout", PLAN, "            if ctx.now - since < ctx.unreachable_timeout:", "            if False:", "a short outage of the scheduler ends a running job's follow-up at once", tests=RECORDED),
    M("plan-budget-off-by-one", PLAN, "    if inv.retries > inv.max_retries:", "    if inv.retries >= inv.max_retries:", "one retry fewer than the budget allows"),
    M("plan-cancel-during-collection-cancels", PLAN, "    if inv.cancel_requested and inv.failure_class not in ended_by_cancel:", "    if False:", "a cancel during collection is ignored until the collection succeeds", tests=("tests/engine/test_fences.py", "tests/engine/test_plan_execute.py")),
    M("plan-fence-won-ignores-cancel", PLAN, "    if inv.cancel_requested:\n        return Cancelled(why)", "    if False:\n        return Cancelled(why)", "a cancelled attempt whose fence won is retried instead of ending CANCELLED", tests=("tests/engine/test_plan_answers.py", *TESTS_FOR[EXECUTE])),
    M("plan-cancel-retrying-sends-cancel", PLAN, "    if inv.state in (JobState.PREPARED, JobState.RETRYING):\n        return Commit(Cancelled(", "    if inv.state is JobState.PREPARED:\n        return Commit(Cancelled(", "a cancel between attempts waits for a job that does not exist (an invalid transition)", tests=("tests/engine/test_plan_answers.py", "tests/engine/test_engine_fake.py")),
    M("follow-never-gives-up", PLAN, "    return Follow(now - since >= unreachable_timeout, since)", "    return Follow(False, since)", "a driver follows an unresolved invocation for ever instead of reporting it", tests=("tests/engine/test_plan_answers.py", *RECORDED)),
    M("follow-waits-on-a-final-sight", PLAN, "        return Follow(True, open_since)  # nothing", "        return Follow(False, open_since)  # nothing", "a driver waits out the timeout on an observation that waiting cannot change", tests=("tests/engine/test_plan_answers.py", "tests/engine/test_fences.py")),
    # -- the classification of observations ---------------------------------------------------
    M("observe-node-fail-is-application", OBSERVE, "    RemoteState.NODE_FAIL: FailureClass.NODE_FAILED,\n", "", "a node failure is blamed on the command, never retried"),
    M("observe-fence-not-read", OBSERVE, "    if claim is not None and claim.fenced:\n        return Seen(Sight.FENCED, evidence, status.job_id, final=True)\n", "", "a fence in the run directory is read as plain absence"),
    M("observe-timeout-is-infra", OBSERVE, "    if state in (RemoteState.TIMEOUT, RemoteState.OUT_OF_MEMORY):", "    if state in (RemoteState.OUT_OF_MEMORY,):", "a job's own time limit is not its own end"),
    # -- the error boundary ---------------------------------------------------------------------
    M("boundary-maybe-is-retried", PLAN, "    if facts.maybe_submitted:\n        return OutcomeUnknown", "    if False:\n        return OutcomeUnknown", "a submit that may have gone through is retried blind", tests=TESTS_FOR[EXECUTE]),
    M("boundary-misconfigured-is-retried", PLAN, "    if not facts.retryable:\n        return Misconfigured(facts.reason, facts.fix)", "    if False:\n        return Misconfigured(facts.reason, facts.fix)", "a changed host key is retried until the budget is spent", tests=TESTS_FOR[EXECUTE]),
    M("boundary-bug-is-nothing-submitted", EXECUTE, "    return ErrorFacts(True, True, False, f\"{type(error).__name__}: {error}\", \"\")", "    return ErrorFacts(False, True, False, f\"{type(error).__name__}: {error}\", \"\")", "an adapter bug is read as proof that nothing was submitted"),
    M("slurm-timeout-is-failed", PARSE, '"TIMEOUT": RemoteState.TIMEOUT,', '"TIMEOUT": RemoteState.FAILED,', "a job's own time limit reads as a plain failure"),
    M("slurm-node-fail-is-failed", PARSE, '"NODE_FAIL": RemoteState.NODE_FAIL,', '"NODE_FAIL": RemoteState.FAILED,', "an infrastructure failure is blamed on the command, never retried"),
    M("slurm-preempted-is-pending", PARSE, '"PREEMPTED": RemoteState.PREEMPTED,', '"PREEMPTED": RemoteState.PENDING,', "a preempted job is waited on forever"),
    M("slurm-completing-is-done", PARSE, '"COMPLETING": RemoteState.RUNNING,', '"COMPLETING": RemoteState.COMPLETED,', "the end is read before the epilog and the marker are final"),
    M("slurm-suspended-is-unknown", PARSE, '"SUSPENDED": RemoteState.PENDING,', '"SUSPENDED": RemoteState.UNKNOWN,', "a suspended job is given up on as unknown"),
    M("slurm-unknown-is-success", PARSE, "SLURM_STATES.get(row.state, RemoteState.UNKNOWN)", "SLURM_STATES.get(row.state, RemoteState.COMPLETED)", "a state word we do not know is guessed to be success"),
    M("slurm-nonzero-completed-succeeds", PARSE, "exit_code not in (None, 0):", "exit_code is None:", "a COMPLETED job whose command exited non-zero counts as success"),
    M("slurm-marker-ignored", PARSE, "        exit_code = marker\n", "        exit_code = None\n", "the command's own status (the marker) is ignored for sacct's"),
    M("slurm-signal-not-128", PARSE, "return 128 + row.exit_signal", "return row.exit_signal", "death by SIGKILL reads as exit 9"),
    M("slurm-kill-read-as-status", PARSE, 'frozenset({"COMPLETED", "FAILED"})', 'frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"})', "ExitCode of a job Slurm killed is taken as the command's status"),
    M("slurm-our-cancel-unattributed", PARSE, 'cancelled_by = "vibesys"', "cancelled_by = None", "a cancel we asked for is not recorded as ours"),
    M("slurm-lag-row-trusted", PARSE, "if isinstance(row, SacctRow) and row.job_name == SACCT_PLACEHOLDER_NAME:", "if False:", "sacct's stale placeholder row during lag is taken as evidence"),
    M("sbatch-id-prefix-accepted", PARSE, r'r"^([0-9]+)(?:;([A-Za-z0-9_.-]+))?$"', r'r"^([0-9]+)"', "sbatch output with trailing junk yields a job id"),
    # -- exit statuses of run and wait -------------------------------------------------------
    M("exit-infra-75-to-1", EXITS, "EXIT_INFRA_FAILED = 75", "EXIT_INFRA_FAILED = 1", "an exhausted retry budget exits like an application failure"),
    M("exit-unresolved-4-to-0", EXITS, "EXIT_UNRESOLVED = 4", "EXIT_UNRESOLVED = 0", "an outcome that cannot be proven exits as success"),
    M("exit-interrupted-130-to-0", EXITS, "            return EXIT_INTERRUPTED", "            return 0", "a cancelled run exits as success"),
    M("exit-bad-input-2-to-1", EXITS, "            return EXIT_BAD_INPUT", "            return 1", "a rejected request exits like a failed command"),
    M("exit-app-failure-without-code-is-0", EXITS, "inv.exit_code if inv.exit_code not in (None, 0) else 1", "inv.exit_code or 0", "a failure without a recorded code exits 0"),
    M("exit-detached-is-1", EXITS, "return 0  # detached", "return 1  # detached", "`run --detach` of a healthy job exits as a failure"),
    M("exit-broken-done-is-0", EXITS, "\n    return 1\n", "\n    return 0\n", "a DONE record without an outcome exits as success"),
    # -- the journal's compare-and-swap ------------------------------------------------------
    M("cas-ignores-version", STORE, '"WHERE id=? AND state=? AND version=?"', '"WHERE id=? AND state=? AND ?>=0"', "two writers that read the same state both win"),
    M("cas-ignores-state", STORE, '"WHERE id=? AND state=? AND version=?"', "\"WHERE id=? AND ?!='' AND version=?\"", "the state term alone dropped", equivalent="every transition bumps version (nothing else writes state), so id and version already pin the state"),
    M("cas-lost-race-goes-on", STORE, "if moved != 1:", "if moved > 1:", "a writer that lost the race goes on as if it had won"),
    M("history-seq-off-by-one", STORE, "                        current.version + 1,\n                        current.state,", "                        current.version + 2,\n                        current.state,", "history rows are numbered with gaps"),
    # -- leases ------------------------------------------------------------------------------
    M("lease-expiry-boundary", LEASES, "return expires is None or expires <= now", "return expires is None or expires < now", "a lease still holds at the very moment it expires"),
    M("lease-no-renewal", LEASES, "if holder is None or holder == owner:", "if holder is None:", "a holder cannot renew its own lease"),
    M("lease-dead-holder-blocks", LEASES, "        return not alive\n", "        return False\n", "a provably dead holder blocks takeover until expiry"),
    M("lease-live-holder-overtaken", LEASES, "    if alive is not None:\n        return not alive\n", "    if alive is False:\n        return True\n", "a live local holder past expiry is taken over (a double submit)"),
    M("lease-bulk-ignores-holders", LEASES, "rows if lease_free(holder, _at(exp), owner, moment))", "rows)", "a reconcile round takes leases that live processes hold"),
    M("lease-bulk-expires-at-once", LEASES, "[(owner, iso(moment + ttl), i) for i in sorted(taken)]", "[(owner, iso(moment), i) for i in sorted(taken)]", "leases taken in bulk expire at once"),
    M("lease-release-not-owned", LEASES, '"WHERE id=? AND lease_owner=?",', "\"WHERE id=? AND ?!=''\",", "a process releases leases it does not hold"),
    # -- SkyPilot classification ---------------------------------------------------------------
    M("sky-success-without-marker", SKY, "return status(RemoteState.UNKNOWN, final=True)", "return status(RemoteState.COMPLETED, 0)", "SkyPilot's SUCCEEDED without the wrapper's marker is read as success"),
    M("sky-marker-ignored", SKY, "    if files.exit_code is not None:\n", "    if False:\n", "the command's true exit code is lost (SkyPilot says 100 for every failure)"),
    M("sky-killed-job-blamed", SKY, "return status(RemoteState.NODE_FAIL if claimed else RemoteState.LAUNCH_FAILED)", "return status(RemoteState.FAILED)", "a job killed with its allocation is blamed on the command, never retried"),
    M("sky-lost-allocation-unseen", SKY, "if seen.cluster is ClusterView.GONE and (claim_allocation or recorded_allocation):", "if False:", "an attempt whose allocation ended is not retried on a new one"),
    # -- cluster leases ------------------------------------------------------------------------
    M("sky-killed-with-allocation-is-app-failure", SKY, "        if code >= 128 and (seen.cluster is ClusterView.GONE or started_elsewhere):\n", "        if False:\n", "a command killed as its allocation ended counts as its own failure, not retried"),
    M("lease-launch-left-up-failed", CLUSTERS, "    if sight.up:\n", "    if False:\n", "a launch a crash interrupted after it brought the cluster up is recorded failed: a cluster nobody records"),
    M("lease-release-not-redone", CLUSTERS, "        if sight.exists:\n            return _release(", "        if False:\n            return _release(", "an interrupted release is recorded done while the cluster still holds its allocation"),
    M("lease-table-use-while-releasing", LEASE_TABLE, '{"trigger": "Used", "source": [L.UP], "dest": None}', '{"trigger": "Used", "source": [L.UP, L.RELEASING], "dest": None}', "an attempt is submitted onto a cluster on its way down"),
    M("lease-table-release-ends-a-launch", LEASE_TABLE, '{"trigger": "Released", "source": [L.RELEASING], "dest": L.RELEASED}', '{"trigger": "Released", "source": [L.LAUNCHING, L.RELEASING], "dest": L.RELEASED}', "a launch under way is recorded released without a release intended (a cluster nobody records)"),
    M("lease-release-while-busy", CLUSTER_RECORDS, "            if busy:  # checked with the write lock held", "            if False:  # mutant", "a release ends the allocation under a running evaluation"),
    M("down-never-released", CLUSTERS, "    return isinstance(request, ReleasedWhenDone) and request.down\n", "    return False\n", "run --down leaves the campaign's cluster up after its last evaluation"),
    M("campaign-two-at-once", CLUSTERS, "    if others:\n", "    if False:\n", "two evaluations of one campaign run at once on its cluster"),
    M("lease-live-owner-settled", CLUSTER_RECORDS, "if lease_free(lease.owner, lease.owner_expires_at, owner, moment)", "if True", "reconcile settles a launch its live owner is still carrying out"),
    M("lease-up-row-not-lost", CLUSTER_RECORDS, 'ended = step(live, "Lost" if live.state is LeaseState.UP else "Released")', "ended = LeaseState.RELEASED", "an allocation that ended under the campaign reads as released by us"),
    M("provenance-never-recorded", PROVENANCE, "    if any(known.get(name) != value for name, value in fresh.items()):\n", "    if False:\n", "where an attempt ran is never recorded"),
    M("shared-poll-ignores-version", SHARED_POLL, "if seen is None or (seen.attempt, seen.version) != (inv.attempt, inv.version):", "if seen is None or seen.attempt != inv.attempt:", "an observation taken before the driver's last commit is read as fresh"),
    M("shared-poll-rereads-a-round", SHARED_POLL, "if seen.round <= self.consumed.get(inv.id, 0):", "if seen.round < self.consumed.get(inv.id, 0):", "a driver reads the same round twice"),
    M("shared-poll-stale-when-due", SHARED_POLL, "if due is not None and due <= self.engine.clock() and row.poller != self.engine.owner:", "if False:", "an observation older than a round is read as fresh once the next is due"),
    M("poller-lease-ignores-holder", POLLS, "if not poller_free(current.poller, current.poller_expires_at, owner, now):", "if False:", "two processes run a site's round at once (a live poller's lease is taken)"),
    M("poller-dead-lease-blocks", POLLS, "if not poller_free(current.poller, current.poller_expires_at, owner, now):", "if current.poller not in (None, owner):", "a dead poller's lease never passes to another"),
    M("poller-release-puts-off-the-round", POLLS, '"due_at=CASE WHEN due_at IS NULL OR ? < due_at THEN coalesce(?, due_at) "', '"due_at=CASE WHEN 1 OR ? < due_at THEN coalesce(?, due_at) "', "each probe that finds another end puts the confirming round off again (it may never run)"),
    M("shared-poll-settles-a-lone-end", SHARED_POLL, "settle = 0.0 if len(ended) == len(refs) else schedule.settle", "settle = schedule.settle", "a lone job's end waits for others that will never end with it"),
    M("shared-poll-no-settle", SHARED_POLL, "return max(now + _seconds(settle), _after(row.started_at, floor) or now)", "return max(now, _after(row.started_at, floor) or now)", "a batch's ends cost a status round each"),
    M("slurm-forgotten-claim-final-at-once", STATUS_RULES, 'final = claim is not None and claim.kind == "job" and sacct_caught_up', 'final = claim is not None and claim.kind == "job"', "a job sacct has not caught up with yet is given up as killed"),
    M("slurm-name-takes-any-row", STATUS_RULES, "            if row.job_id == recorded:\n", "            if True:\n", "another job of the same name (a resubmission by hand) is taken for the attempt"),
    M("slurm-refused-copy-is-the-end", STATUS_RULES, "return claimer if claimer and claimer != job_id else None", "return None", "a copy of the job that found the attempt claimed and ran nothing is read as the attempt's end (exit 85)"),
    M("slurm-lookup-takes-any-of-a-name", STATUS_RULES, "or _earlier(row, held):", "or True:", "a lookup by name takes whichever job of the name squeue lists last"),
    M("poller-frozen-blocks", POLLS, "    return expires is None or expires <= now\n", "    return identity_alive(holder) is None and (expires is None or expires <= now)\n", "a frozen (SIGSTOPped) poller keeps every other process blind for good"),
    M("poller-round-before-due", POLLS, "not (force or probe)", "False", "a process whose view of the schedule is stale runs a round before it is due"),
    M("clock-second-kept", "vibesys/journal_schema/clock.py", "    if cached != second:", "    if cached < 0:", "the commit clock keeps the first second's text for ever", tests=("tests/journal_schema/test_journal_store.py",)),
    M("ids-random", PREPARE, 'return f"{time.time_ns() // 1_000_000:011x}{random_bits:05x}"', "return os.urandom(8).hex()", "invocation ids no longer sort by creation (each commit writes a cold page of every table)", tests=("tests/engine/test_engine_fake.py",)),
    M("poll-unshared", CORE, "return self.shared.observe(inv, shared)", "return self.shared._direct([inv], shared)[inv.id]", "every driver asks the scheduler on its own (one query per process per round)"),
    M("live-status-without-a-terminal", RUN_COMMAND, "if quiet or not both:", "if quiet:", "the status line is drawn into pipes and files"),
    M("decision-kept-whole-reads-event", MACHINE, '"emit_collect", "emit_cancel"}', '"emit_collect", "emit_cancel", "emit_finish"}', "a decision whose effect reads the event is kept whole: a later event gets the first one's outcome"),
    # -- JobResult and the evaluation bridge -----------------------------------------------------
    M("result-infra-class-lost", JOB_RESULT, "return infra.get(inv.failure_class, JobStatus.UNRESOLVED)", "return JobStatus.TRANSPORT_LOST", "an exhausted retry budget loses the failure class that spent it"),
    M("result-unresolved-guessed", JOB_RESULT, "    if inv.state in (JobState.UNRESOLVED, JobState.COLLECTING):\n        return JobStatus.UNRESOLVED", "    if inv.state in (JobState.UNRESOLVED, JobState.COLLECTING):\n        return JobStatus.COMPLETED", "an outcome that cannot be proven is reported as success"),
    M("result-timeout-unseen", JOB_RESULT, "    if outcome == Outcome.CANCELLED and timed_out(history):", "    if False:", "an evaluation its timeout ended reads as cancelled by someone"),
    M("result-outcome-ignored", JOB_RESULT, "        return JobStatus(outcome)\n", "        return JobStatus.APPLICATION_FAILED\n", "a rejected or misconfigured evaluation is blamed on the candidate"),
    M("result-unresolved-exits-0", JOB_RESULT_MODEL, "    JobStatus.UNRESOLVED: EXIT_UNRESOLVED,", "    JobStatus.UNRESOLVED: 0,", "vibesys-eval exits as success when the outcome cannot be proven"),
    M("bridge-forbidden-named-unknown", BRIDGE_PROTOCOL, "        if name in FORBIDDEN_FIELDS:\n", "        if False:\n", "a request naming a partition is refused without the reason (only as an unknown field)"),
    M("bridge-dotdot-glob", BRIDGE_PROTOCOL, ' or ".." in parts or ', " or ", "an artifact glob climbs out of the workspace"),
    M("bridge-foreign-workspace", BRIDGE_ADMISSION, "if os.path.normpath(request.workspace) not in (self.workspace, self.workspace_real):", "if False:", "one candidate's helper evaluates another candidate's workspace"),
    M("bridge-unlisted-variable", BRIDGE_ADMISSION, "unlisted = sorted(set(request.env) - self.allowed_env)", "unlisted: list[str] = []", "a request passes variables the operator never allowed"),
    M("bridge-broker-token-unnamed", BRIDGE_ADMISSION, 'if service is not None and service != "the evaluation bridge":', "if False:", "the GPU broker's token is refused without saying it is the broker's"),
    M("bridge-id-replaced", BRIDGE_ROWS, "INSERT OR IGNORE INTO bridge_requests", "INSERT OR REPLACE INTO bridge_requests", "a request id claimed again names a second invocation"),
    M("bridge-other-body-reattaches", BRIDGE_RUNNER, "    differs = first_difference(row.body, evaluation.body())", "    differs = None", "the same request id with another command reattaches to the first one's result"),
    M("bridge-other-uid-reattaches", BRIDGE_RUNNER, "    if row.uid != evaluation.uid:", "    if False:", "another user's helper reattaches to an evaluation by guessing its request id"),
    M("bridge-timeout-unmarked", BRIDGE_RUNNER, 'f"{TIMEOUT_CANCEL} {timeout} s"', 'f"deadline {timeout} s"', "an evaluation its timeout ended is reported CANCELLED"),
    M("bridge-resume-ignored", BRIDGE_FOLLOW, "            resumed = inv.attempt == self._resume.attempt", "            resumed = False", "a reconnecting helper gets the output it has again"),
    M("eval-retry-new-id", EVAL_CLIENT, '        return line_of({**self.body, "resume": resume})', '        return line_of({**self.body, "request_id": uuid.uuid4().hex, "resume": resume})', "a reconnecting helper starts a second evaluation"),
    M("tokens-one-format", TOKENS, 'BROKER_PREFIX: Final = "vbgpu1."', 'BROKER_PREFIX: Final = "vbeval1."', "the GPU broker's and the bridge's tokens cannot be told apart"),
    # -- vibesys check ------------------------------------------------------------------------
    M("check-failure-exits-0", CHECK_MODEL, "return EXIT_OK if self.ok else EXIT_FAILED", "return EXIT_OK", "a site whose check failed exits as ready (session serve would start on it)"),
    M("check-warning-fails-the-site", CHECK_MODEL, "        return not self.failed\n", "        return not self.failed and not self.warnings\n", "a warning (a busy queue, a certificate expiring in days) refuses the site"),
    M("check-needs-ignored", CHECK_RUNNER, "    return row.status is Status.FAIL or (row.status is Status.SKIPPED and bool(row.fix))", "    return False", "every check after a frozen controller waits its own time limit (and reports its own noise)"),
    M("check-waits-without-limit", CHECK_RUNNER, "    worker.join(check.budget)", "    worker.join()", "a frozen sshd or slurmctld hangs the whole check"),
    M("cert-expired-passes", CHECK_CERT, "    if left <= 0:\n", "    if False:\n", "an expired SSH certificate is reported as about to expire, not as a failure"),
    M("cert-warn-threshold-ignored", CHECK_CERT, "    if left < warn_days * 86400:\n", "    if False:\n", "a certificate hours from expiry passes without a word"),
    M("check-node-nonce-unchecked", CHECK_JOB, '        if reply.get("nonce") != self.settings.nonce:\n', "        if False:\n", "a node that cannot read the check's file still proves the root shared"),
    M("check-bwrap-probe-unread", CHECK_JOB, '    if reply.get("probe_rc") != "0" or reply.get("probe") != probe.settings.nonce:\n', "    if False:\n", "a node whose bwrap cannot confine a command passes the bwrap check"),
    # -- what an invocation was started with, wherever it is carried on (issue 20) ------------
    M("outage-counts-from-now", OUTAGE, "since=min(recorded, seen.since or recorded))", "since=min(now, seen.since or now))", "the unreachable timeout counts from whichever process looks now: repeated reconciles never give up"),
    M("outage-never-ends", OUTAGE, "        if recorded is not None:\n            journal.clear_unreachable", "        if False:\n            journal.clear_unreachable", "an outage that ended still counts for the next one: a later outage gives up early"),
    M("settings-retry-from-process", CORE, "            policy_of(inv.max_retries, settings),\n", "            self.retry,\n", "a later process retries with its own delay, not the recorded one", tests=RECORDED),
    M("settings-unreachable-timeout-from-process", CORE, "            timedelta(seconds=settings.unreachable_timeout_seconds),\n", "            self.unreachable_timeout,\n", "a later process gives up on an unreachable scheduler by its own default", tests=RECORDED),
    M("reconcile-waiting-unsaid", RECONCILE, "    return engine.journal.unreachable_since(inv.id, inv.attempt)\n", "    return None\n", "reconcile leaves a run waiting out an outage without saying so (or until when)"),
    M("reconcile-orphan-from-request", PLAN, "    if inv.settings.cancel_when_orphaned and not inv.cancel_requested:", "    if False:", "a broker job whose client is gone is followed to its end instead of cancelled", tests=RECORDED),
    M("exit-waiting-is-0", RENDER, "    return EXIT_WAITING if waiting else 0", "    return 0", "reconcile exits 0 while it left a run waiting out an outage"),
    M("exit-dependency-failed-is-130", EXITS, "            return EXIT_DEPENDENCY_FAILED", "            return EXIT_INTERRUPTED", "a child whose parent failed exits like an interrupt"),
    M("settings-bool-is-a-number", SETTINGS, "            if isinstance(value, bool) or not isinstance(value, int | float):", "            if not isinstance(value, int | float):", "a damaged settings record (true for a timeout) is read as 1 s"),
    M("follower-interrupt-cancels", DRIVE, "                if not options.owner:\n                    return inv\n                inv = engine.request_cancel", "                inv = engine.request_cancel", "`wait` interrupted in the background cancels the job it only follows"),
    M("wait-owns", CLI, "            options = DriveOptions(tail, interrupt=interrupt, status=live, owner=False)", "            options = DriveOptions(tail, interrupt=interrupt, status=live)", "`wait` cancels the job on SIGINT/SIGHUP", tests=("tests/test_cli_follow.py",)),
    M("chain-parent-retry-forgets-children", CORE, "            follow_children(self, after, self.journal.active())\n", "            pass\n", "a retried parent's pending child keeps waiting on the failed attempt", tests=CHAINED),
    M("chain-child-never-moves", CHAINS, "    if target is None or waits_on == target:\n", "    if True:\n", "a child whose parent's retry was recorded without it (a crash) waits on the failed attempt for good"),
    M("chain-parent-not-carried", CHAINS, "        parent = carry_parent(engine, child, parent)\n", "        pass\n", "a child in the foreground waits for good on a parent nobody drives"),
    M("chain-failed-parent-is-cancelled", PLAN, "    if failure is FailureClass.CANCELLED and (failed := ctx.parent_failed()):", "    if False:", "a child of a failed parent ends CANCELLED (exit 130), as an interrupt", tests=CHAINED),
    M("chain-failed-parent-submitted", PLAN, "            if failed := ctx.parent_failed():\n                return Commit(ParentFailed(_parent_id(ctx), f\"{failed}: nothing submitted\"))\n            return Commit(SubmitDispatched", "            return Commit(SubmitDispatched", "a child whose intent was recorded before its parent failed is submitted all the same", tests=CHAINED),
    M("chain-slurm-kills-the-child", SCRIPT, '"--kill-on-invalid-dep=no"]', '"--kill-on-invalid-dep=yes"]', "Slurm kills the child when its parent's attempt fails, before the parent's retry exists"),
    M("local-no-end", LOCAL, '            found["end"] = ended.isoformat()', '            found["start"] = ended.isoformat()', "a local attempt's record says nothing of when it ended"),
    M("detach-json-bare-id", RUN_COMMAND, '    if values["detach"] and not values["as_json"]:', '    if values["detach"]:', "`run --detach --json` prints the bare id before its JSON object", tests=("tests/test_cli.py::test_detach_json_prints_one_object",)),
    M("decide-replays-other-pair", MACHINE, "planned = table.planned.get(key)", "planned = next(iter(table.planned.values()), None)", "the table's row of another (state, trigger) decides"),
    M("decide-row-callbacks-dropped", MACHINE, "    for name in callbacks:\n        getattr(model, name)(data)\n", "", "a decision runs none of the callbacks its row names: no submit, fence or finish is ever authorized"),
    M("ui-reader-writes-the-shm", UI_READER, '"mode=ro&readonly_shm=1"', '"mode=ro"', "a read beside WAL files writes its read mark into the -shm"),
    M("ui-reader-makes-wal-files", UI_READER, '"mode=ro&immutable=1"', '"mode=ro"', "a read of a quiet journal creates an empty -wal and a -shm beside it"),
    M("ui-reader-trusts-a-torn-read", UI_READER, "        if _stamp(self.path) != before or self._wal.exists():\n            return False, None\n        return True, result", "        return True, result", "a read during which a checkpoint rewrote the file is taken as the journal"),
    M("ui-token-not-required", UI_APP, 'if not self.authorized(query, headers.get(b"authorization", b"")):', "if False:", "a request without the token is served"),
    M("ui-any-token-will-do", UI_APP, "return any(secrets.compare_digest(g.encode(\"latin-1\", \"replace\"), expected) for g in given)", "return bool(given)", "a wrong token is accepted"),
    M("ui-writes-allowed", UI_APP, 'if scope["method"] not in ("GET", "HEAD"):', 'if scope["method"] not in ("GET", "HEAD", "POST"):', "a POST reaches the routes"),
    M("ui-done-count-counts-all", UI_QUERIES, "counts[JobState.DONE] = total - sum(n for _, n in active)", "counts[JobState.DONE] = total", "DONE counts the unfinished invocations too"),
    M("ui-keyset-page-repeats-a-row", UI_QUERIES, 'clauses.append("i.id < ?")', 'clauses.append("i.id <= ?")', "the next page starts with the last row of this one"),
    M("ui-chunk-splits-a-character", UI_LOGS, "keep = len(data) if final else complete(data)", "keep = len(data)", "a live chunk ends inside a character: both halves are shown replaced"),
    M("ui-path-not-marked", UI_DIAGRAM, "counts[(source, dest)] += 1", "counts[(source, source)] += 1", "the diagram does not mark the edges the history took"),
    M("ui-output-as-markup", UI_PAGE, ">{{ chunk.text }}</pre>", ">{{ chunk.text|safe }}</pre>", "a job's output is inserted into the page as HTML"),
    # -- what a run was started with: the site, the candidate, the cap ------------------------
    M("site-reread", ADAPTER_ACCESS, "parsed.with_site(self.recorded_site(site_digest))", "parsed", "every process reads the site's file again: an edited or deleted file changes jobs in flight", tests=("tests/engine/test_skypilot_candidate.py", "tests/adapters/skypilot/test_profile_on_resume.py")),
    M("site-not-recorded", PREPARE, "site = request.site_record or request.read_site()", "site = None", "an invocation is recorded without the site configuration it runs with", tests=("tests/test_cli_site.py",)),
    M("site-in-request-json", REQUESTS, "        exclude=True,\n", "        exclude=False,\n", "the rendering is copied into every request's JSON instead of recorded once by digest"),
    M("site-replaced-silently", ROWS, '            columns = {"site_digest": digest}', "            columns = {}", "a replacement is a history row that changes nothing (the old site goes on being used)"),
    M("slurm-site-key-ignores-rendering", SLURM_REQUEST, '        return f"{self.site_config}#{recorded}"', "        return self.site_config", "invocations recorded with different renderings of one path share an adapter built from one of them"),
    M("sky-site-key-ignores-rendering", SKY_REQUEST, '        recorded = self.site_record.digest if self.site_record is not None else ""', '        recorded = ""', "campaigns recorded with different profiles share an adapter built from one of them"),
    M("trusted-sized-by-agent-limits", SLURM_REQUEST, "        trusted = check_trusted(person, loaded.gate)", "        trusted = check_request(person, loaded.config.agent_gpu)", "a site that gives agents 1 GPU cannot run a 2-GPU trusted evaluation"),
    M("alias-not-wired", SITE_FILE, '    if "slurm_gpu" not in raw:', "    if True:", "a [slurm_gpu] file is refused as an unknown table: the documented alias does not work"),
    M("alias-warns-every-read", SITE_FILE, "    if text is None or text in _WARNED:", "    if text is None:", "the deprecation warning is printed once per reader, not once per run"),
    M("alias-gate-sizing-dropped", TRUSTED, "    if gate is not None:", "    if False:", "a trusted evaluation from a [slurm_gpu] file loses its gates' GPUs, time and partitions"),
    M("cap-per-broker", RUN_SLOTS, "        ticket = journal.slot_enqueue(self.run_id, self.owner)", "        ticket = journal.slot_enqueue(f\"{self.run_id}:{id(self)}\", self.owner)", "each broker keeps its own cap: a run with N candidates holds N x cap jobs"),
    M("cap-not-first-come", SLOTS, "                elif other < ticket:", "                elif False:", "a command that came later takes the freed slot before one waiting longer"),
    M("cap-dead-broker-holds-forever", SLOTS, "if identity_alive(o) is False}", "if False}", "a broker that died keeps its slots for good: the run's cap shrinks until nothing runs"),
    M("cap-dead-broker-frees-running-job", SLOTS, "        if state != ACTIVE or invocation is None:", "        if True:", "a dead broker's slot is reused while its job still runs in Slurm (cap + 1 jobs)"),
    M("sky-candidate-not-verified", SKY_STAGED, "        staging.verify_command(work, manifest.digest),\n", "", "the job runs in whatever the shared file system holds, not the snapshot recorded"),
    M("sky-passed-variables-dropped", SKY_OPS, '        flags = [word for key in sorted(passed) for word in ("--secret", key)]', "        flags = []", "a SkyPilot job never gets the variables its evaluation passed"),
    M("sky-passed-values-shown", SKY_OPS, "        hide = [value for value in passed.values() if len(value) >= 4]", "        hide = []", "the values passed to a SkyPilot job appear in the journal's evidence"),
    M("bridge-site-read-per-evaluation", BRIDGE_SITE, '        return slurm_request.request_from_site(\n            "sbatch", values, self.slurm_file, self.slurm_rendering\n        )', '        return slurm_request.make_request("sbatch", {**values, "slurm_config": self.slurm_config})', "an edited slurm.toml changes the evaluations of a session already serving"),
    M("bridge-local-stage-unprobed", BRIDGE_FILES, "        code = _remote.EXIT_OK if problem is None else _remote.EXIT_MISMATCH", "        code = _remote.EXIT_OK", "a staged snapshot changed since it was staged is reused: local evaluations stop on a copy that cannot verify"),
    M("sky-candidate-not-staged", SKY_STAGED, "    if candidate is None:\n        return \"\", \"\"", "    if True:\n        return \"\", \"\"", "a SkyPilot evaluation runs without its candidate"),
    M("lease-site-dropped", CLUSTERS, '        "site_digest": inv.site_digest,', '        "site_digest": None,', "a campaign's cluster is released with whatever the profiles file says now (or not at all)", tests=("tests/engine/test_skypilot_candidate.py",)),
    # -- the caller's context, bytes, journal faults, edges (issue 21) ----------------------
    M("journal-identity-unchecked", STORE, "if self._identity is not None and file_identity(self.path) != self._identity:", "if False:", "a journal deleted or replaced mid-run goes unnoticed (the record only in the unlinked file)", tests=(FAULTS,)),
    M("journal-fault-is-bad-input", RUN_COMMAND, "inv.id if inv else None, store), EXIT_JOURNAL_FAULT)", "inv.id if inv else None, store), EXIT_BAD_INPUT)", "a journal that failed mid-run reads as bad input with nothing written (an invitation to run it again)", tests=(FAULTS,)),
    M("journal-fault-swallowed-by-a-boundary", EXECUTE, "    except JOURNAL_FAILURES:\n        raise\n    except Exception as exc:\n        engine.note(inv, f\"collection failed", "    except Exception as exc:\n        engine.note(inv, f\"collection failed", "a full disk while collecting is retried as a collection failure for ten minutes", tests=("tests/engine/test_journal_fault_boundaries.py",)),
    M("journal-fault-read-as-maybe-submitted", EXECUTE, "        receipt = backend.submit(request)\n    except JOURNAL_FAILURES:\n        raise\n", "        receipt = backend.submit(request)\n", "a journal that failed before the submit is read as a submit that may have gone through", tests=("tests/engine/test_journal_fault_boundaries.py",)),
    M("journal-created-in-place", "vibesys/journal_schema/opening.py", "        if not path.exists():\n            _create(path)\n", "", "a creation killed half-way leaves a half-made journal that read commands refuse", tests=(f"{FAULTS}::test_a_creation_killed_half_way_leaves_no_journal",)),
    M("job-output-decoded", "vibesys/osutil/logtail.py", "                    sink.write(chunk)\n", "                    sink.write(chunk.decode(\"utf-8\", \"replace\").encode())\n", "binary and Latin-1 output is rewritten on its way out", tests=("tests/test_output_bytes.py",)),
    M("ignored-signals-dropped", "vibesys/adapters/local.py", "FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)", "FORWARDED = ()", "a job loses the signal dispositions its caller set (nohup, a script's background job)", tests=("tests/test_job_context.py",)),
    M("srun-end-waits-for-a-round", "vibesys/adapters/slurm/srun.py", "        if claim is None or claim.kind != \"job\" or code is None:\n", "        if claim is None or claim.kind != \"job\":\n", "an srun job that left no marker (killed, out of time) is read as ended by its srun's return", tests=("tests/adapters/test_srun_end.py",)),
    M("srun-end-of-another-job", "vibesys/adapters/slurm/srun.py", "        if job.job_id is not None and claimer != str(job.job_id):\n", "        if False:\n", "the end of a copy that claimed the attempt is taken for this job's", tests=("tests/adapters/test_srun_end.py",)),
    M("plain-request-takes-anything", "vibesys/adapters/plain_request.py", "        unknown = sorted(set(data) - _FIELDS)\n", "        unknown: list[str] = []\n", "a recorded local request with fields it does not know is taken as valid", tests=("tests/adapters/test_plain_request.py",)),
    M("table-label-breaks-rows", RENDER, "    body = [[one_line(str(cell)) for cell in r] for r in rows]", "    body = [[str(cell) for cell in r] for r in rows]", "a label with a newline or an escape sequence breaks journal list", tests=("tests/test_edge_inputs.py::test_labels_with_newlines_and_escapes_stay_on_their_row",)),
    M("probe-prompts-a-round-for-an-own-job", SHARED_POLL, "                and not _seen_ending_here(engine, inv)\n", "", "a marker found a moment before srun returns makes a status round of a job whose end is seen here", tests=("tests/engine/test_own_end.py",)),
    M("ended-unobserved-counts-for-the-burst", POLLS, '"WHERE w.site=? AND i.outcome IS NULL",', '"WHERE w.site=?",', "a job that ended unobserved makes the next job's first round due at once", tests=("tests/engine/test_own_end.py",)),
    M("journal-path-not-checked", "vibesys/journal_schema/opening.py", "    check_journal_path(path)\n", "", "--journal /dev/null creates /dev/null-journal", tests=("tests/test_edge_inputs.py::test_a_journal_that_is_not_a_regular_file_is_refused_creating_nothing",)),
    # -- the run directories' one reader (rundir/markers.py) ----------------------------------
    M("markers-setup-failure-is-the-commands-end", MARKERS, "        exit_code=_number(files.get(EXIT_CODE_FILE)) if setup is None else None,\n", "        exit_code=_number(files.get(EXIT_CODE_FILE)),\n", "a Slurm job whose setup failed reads as a command that exited 86 (FAILED, not LAUNCH_FAILED)"),
    M("markers-last-line-lost", MARKERS, """while IFS= read -r l || [ -n "$l" ]; do""", """while IFS= read -r l; do""", "a marker written without its newline (`printf %s`) is read as empty over a remote transport"),
    M("markers-empty-refused-unseen", MARKERS, r"""    '    printf "%s %s\\n" "$i" "$f"\n'""", "", "an empty refused file (a wrapper killed while it wrote why) is not seen over a remote transport: the attempt reads as never started"),
    M("markers-negative-code-lost", MARKERS, '_NUMBER: Final = re.compile(r"-?[0-9]+")', '_NUMBER: Final = re.compile(r"[0-9]+")', "a negative exit code in a marker is read as no marker"),
    M("markers-odd-number-crashes", MARKERS, "    return int(value) if _NUMBER.fullmatch(value) else None", "    return int(value) if value.lstrip(\"-\").isdigit() else None", "a marker holding `--5` or a superscript digit stops the whole status round with a ValueError"),
    M("markers-local-newlines-translated", MARKERS, 'path.read_bytes().replace(b"\\0", b"").decode("utf-8", "replace")', 'path.read_text(errors="replace")', "the local reader translates \\r and keeps NULs: the same directory reads differently here and over SSH"),
    M("markers-times-never-read", MARKERS, '    return _READ + (_TIMES if times else "") + "exit 0\\n"', '    return _READ + "exit 0\\n"', "SkyPilot's end time waits for its queue (the marker's time is never read)"),
    M("markers-cut-short-committed", MARKERS, "        files = pending.setdefault(int(index), {})\n        if not name and not bar:\n            done[int(index)] = files\n", "        files = done.setdefault(int(index), {})\n        if not name and not bar:\n            pass\n", "a directory whose answer was cut short reads as one that holds less"),
    M("sky-states-cut-short-taken", SKY_RUN_DIRS, "        if len(states) < len(dirs):\n", "        if False:\n", "a login node's answer cut short reads as run directories without a claim (NOT_FOUND, then a fence)"),
    M("sky-states-without-times", SKY_RUN_DIRS, "read_script(times=True)", "read_script(times=False)", "SkyPilot's end time waits for its queue (the marker's time is never asked for)"),
    M("slurm-round-cut-short-taken", "vibesys/adapters/slurm/scheduler.py", "        if not split or len(found) < len(dirs):\n", "        if not split:\n", "a status round's markers cut short read as jobs without a marker or claim", tests=MARKERS_TESTS),
    M("srun-end-without-its-time", "vibesys/adapters/slurm/srun.py", "read_here({directory: job.job_name}, times=True)", "read_here({directory: job.job_name})", "an srun job seen ending here records no end time", tests=("tests/adapters/test_srun_end.py",)),
    M("start-up-interrupt-raises", "vibesys/cli/main.py", "        status = run_fast(sys.argv[1:])\n", "        interrupts_raise()\n        status = run_fast(sys.argv[1:])\n", "a Ctrl-C in run's start-up is a KeyboardInterrupt an import may drop (the job runs on)", tests=("tests/test_edge_inputs.py",)),
]
# fmt: on
# fmt: off
MUTANTS += [
    # -- the campaign queue, exact timeouts (issue 22) ---------------------------------------
    M("queue-not-waited-for", PLAN, "            if ctx.queue is not None and ctx.queue.ahead:\n", "            if False:\n", "a campaign's second evaluation is submitted while the first still runs (REJECTED, or two on one cluster)", tests=(QUEUE_ENGINE,)),
    M("queue-never-joined", STORE, "            if campaign is not None:\n                join_queue(", "            if False:\n                join_queue(", "an evaluation recorded on a busy campaign is refused instead of waiting its turn", tests=(QUEUE_ENGINE,)),
    M("queue-counts-ended-ones", "vibesys/journal_schema/queue.py", '" WHERE q.campaign = ? AND q.seq < ? AND i.state != ? ORDER BY q.seq"', '" WHERE q.campaign = ? AND q.seq < ? AND i.state != ? OR 1 ORDER BY q.seq"', "an ended evaluation still holds the queue: nothing after it ever runs", tests=(QUEUE_CLI,)),
    M("queue-order-is-not-kept", "vibesys/journal_schema/queue.py", "q.seq < ?", "q.seq != ?", "the evaluations of a campaign wait for each other (or run out of order)", tests=(QUEUE_CLI,)),
    M("queue-waits-on-nobody", DRIVE, "                    carry_on_ahead(engine, inv)\n", "", "a run waits forever behind a detached evaluation that nobody drives", tests=("tests/test_cli_skypilot.py::test_a_run_on_a_busy_campaign_waits_its_turn_instead_of_being_refused",)),
    M("deadline-never-cancels", "vibesys/engine/deadline.py", "        if done.wait(max(left_seconds, 0.0)):\n            return\n", "        done.wait()\n        return\n", "an evaluation's timeout is not enforced: it runs to the job's own (minute) limit", tests=("tests/bridge/test_server.py::test_a_timeout_ends_the_evaluation_as_timeout",)),
    M("gpu-timeout-not-sent", "vibesys/broker/client.py", '        body["timeout_seconds"] = args.timeout_seconds', "        pass", "vibesys-gpu --timeout-seconds is accepted and ignored", tests=("tests/broker/test_protocol.py::test_the_client_sends_its_timeout_and_refuses_a_bad_one",)),
    M("bridge-sky-candidate-frozen", "vibesys/bridge/site.py", "            if recorded is not None:  # the snapshot as it is now", "            if False:  # the snapshot as it is now", "a SkyPilot session's second evaluation of an edited candidate is refused as changed (MISCONFIGURED)", tests=("tests/bridge/test_session_skypilot.py::test_a_session_on_a_campaign_cluster",)),
    M("gpu-timeout-past-the-limit", "vibesys/broker/admission.py", "            elif timeout > minutes * 60:", "            elif False:", "a --timeout-seconds past the job's --time is taken: Slurm ends it first, as TIMEOUT of Slurm's", tests=("tests/broker/test_admission.py",)),
]
# fmt: on
