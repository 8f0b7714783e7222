"""Named mutants of the state machine, the planner, the classification of observations, the
error boundary, Slurm's classification, the exit statuses of run and wait, the journal's
compare-and-swap and its leases."""

from __future__ import annotations

from tests.mutation.mutants.framework import (
    EXECUTE,
    EXITS,
    JOB_STATE,
    LEASES,
    OBSERVE,
    PARSE,
    PLAN,
    RECORDED,
    STATUS_RULES,
    STORE,
    TABLE,
    TESTS_FOR,
    M,
    Mutant,
)

# One mutant per line, however long: (name, file, original, replacement, why, ...).
# fmt: off
MUTANTS: list[Mutant] = [
    # -- Slurm classification ----------------------------------------------------------------
    # -- the state machine (the oracle in tests/states is written out by hand) ---------------
    M("table-unresolved-cannot-reattach", TABLE, '"source": [S.SUBMITTING, S.UNRESOLVED],\n        "dest": S.RUNNING,', '"source": [S.SUBMITTING],\n        "dest": S.RUNNING,', "an UNRESOLVED job found running can never be followed again"),
    M("table-fence-while-collecting", TABLE, '"source": [S.SUBMITTING, S.RUNNING, S.UNRESOLVED],\n        "dest": None,\n        "after": "emit_fence",', '"source": [S.SUBMITTING, S.RUNNING, S.UNRESOLVED, S.COLLECTING],\n        "dest": None,\n        "after": "emit_fence",', "an attempt whose end is proven could be fenced while its results come home"),
    M("table-dispatch-skips-submit", TABLE, '"after": "emit_submit"}', '"after": "emit_poll"}', "the dispatch no longer authorizes the submit"),
    M("table-misconfigured-from-running", TABLE, '"source": [S.PREPARED, S.SUBMITTING],\n        "dest": S.DONE,\n        "after": "emit_finish",\n    },\n    # The invocation it runs after', '"source": [S.PREPARED, S.SUBMITTING, S.RUNNING],\n        "dest": S.DONE,\n        "after": "emit_finish",\n    },\n    # The invocation it runs after', "a job that may run is ended DONE on a configuration error"),
    M("retryable-application-failure", JOB_STATE, "        FailureClass.TRANSPORT_LOST,\n    }", "        FailureClass.TRANSPORT_LOST,\n        FailureClass.APPLICATION_FAILED,\n    }", "an application failure is retried blindly"),
    M("outcome-cancelled-is-completed", JOB_STATE, "FailureClass.CANCELLED: Outcome.CANCELLED,", "FailureClass.CANCELLED: Outcome.COMPLETED,", "a cancelled job reports success"),
    # -- the planner -------------------------------------------------------------------------
    M("plan-silence-is-absence", PLAN, "            return Commit(FenceIntended(inv.attempt))", "            return _fenced(inv, seen, ctx)", "an attempt nobody sees is called dead without a fence (the double run)"),
    M("plan-redispatch", PLAN, "        case JobState.SUBMITTING if inv.dispatched:\n            return _unsettled(inv, _need(seen), ctx)", "        case JobState.SUBMITTING if inv.dispatched:\n            return Commit(SubmitDispatched(inv.attempt, inv.attempt_job_name(inv.attempt)))", "an attempt whose submit may have happened is submitted again", tests=("tests/engine/test_fences.py", "tests/engine/test_plan_execute.py")),
    M("plan-fence-ignored", PLAN, "        case Sight.FENCED:\n            return _fenced(inv, seen, ctx)\n        case Sight.ABSENT:", "        case Sight.ABSENT:", "a fence that won is never acted on: the invocation hangs"),
    M("plan-unknown-while-running-holds", PLAN, '    return Commit(OutcomeUnknown(f"{seen.sight}: {seen.evidence}"))\n\n\ndef _ended', '    return Hold(f"{seen.sight}: {seen.evidence}")\n\n\ndef _ended', "a running job the scheduler lost is never marked UNRESOLVED", tests=("tests/engine/test_engine_fake.py", "tests/engine/test_plan_execute.py")),
    M("plan-no-unreachable-timeout", PLAN, "            if ctx.now - since < ctx.unreachable_timeout:", "            if False:", "a short outage of the scheduler ends a running job's follow-up at once", tests=RECORDED),
    M("plan-budget-off-by-one", PLAN, "    if inv.retries > inv.max_retries:", "    if inv.retries >= inv.max_retries:", "one retry fewer than the budget allows"),
    M("plan-cancel-during-collection-cancels", PLAN, "    if inv.cancel_requested and inv.failure_class not in ended_by_cancel:", "    if False:", "a cancel during collection is ignored until the collection succeeds", tests=("tests/engine/test_fences.py", "tests/engine/test_plan_execute.py")),
    M("plan-fence-won-ignores-cancel", PLAN, "    if inv.cancel_requested:\n        return Cancelled(why)", "    if False:\n        return Cancelled(why)", "a cancelled attempt whose fence won is retried instead of ending CANCELLED", tests=("tests/engine/test_plan_answers.py", *TESTS_FOR[EXECUTE])),
    M("plan-cancel-retrying-sends-cancel", PLAN, "    if inv.state in (JobState.PREPARED, JobState.RETRYING):\n        return Commit(Cancelled(", "    if inv.state is JobState.PREPARED:\n        return Commit(Cancelled(", "a cancel between attempts waits for a job that does not exist (an invalid transition)", tests=("tests/engine/test_plan_answers.py", "tests/engine/test_engine_fake.py")),
    M("follow-never-gives-up", PLAN, "    return Follow(now - since >= timeout, since)", "    return Follow(False, since)", "a driver follows an unresolved invocation for ever instead of reporting it", tests=("tests/engine/test_plan_answers.py", *RECORDED)),
    M("follow-waits-on-a-final-sight", PLAN, "        return Follow(True, open_since)  # nothing", "        return Follow(False, open_since)  # nothing", "a driver waits out the timeout on an observation that waiting cannot change", tests=("tests/engine/test_plan_answers.py", "tests/engine/test_fences.py")),
    # -- the classification of observations ---------------------------------------------------
    M("observe-node-fail-is-application", OBSERVE, "    RemoteState.NODE_FAIL: FailureClass.NODE_FAILED,\n", "", "a node failure is blamed on the command, never retried"),
    M("observe-fence-not-read", OBSERVE, "    if claim is not None and claim.fenced:\n        return Seen(Sight.FENCED, evidence, status.job_id, final=True)\n", "", "a fence in the job's attempt directory is read as plain absence", tests=("tests/crash/test_every_failpoint.py::test_crash_at_each_failpoint_on_skypilot_then_recover[after_fence_effect]",)),
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
    M("slurm-unexplained-cancel-trusted", STATUS_RULES, 'return record.state == "CANCELLED" and unexplained and killed', "return False", "a child Slurm killed for its dependency, read from sacct before it has the reason, is taken for a plain cancel (a retried parent's child ends CANCELLED)"),
    M("slurm-lag-row-trusted", PARSE, "if isinstance(row, SacctRow) and row.job_name == SACCT_PLACEHOLDER_NAME:", "if False:", "sacct's stale placeholder row during lag is taken as evidence"),
    M("sbatch-id-prefix-accepted", PARSE, "_SBATCH_PARSABLE.fullmatch(text.strip())", "_SBATCH_PARSABLE.match(text.strip())", "sbatch output with trailing junk yields a job id"),
    # -- exit statuses of run and wait -------------------------------------------------------
    M("exit-infra-75-to-1", EXITS, "EXIT_INFRA_FAILED = 75", "EXIT_INFRA_FAILED = 1", "an exhausted retry budget exits like an application failure"),
    M("exit-unresolved-4-to-0", EXITS, "EXIT_UNRESOLVED = 4", "EXIT_UNRESOLVED = 0", "an outcome that cannot be proven exits as success"),
    M("exit-interrupted-130-to-0", EXITS, "            return EXIT_TIMEOUT if timed_out else EXIT_INTERRUPTED", "            return EXIT_TIMEOUT if timed_out else 0", "a cancelled run exits as success"),
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
]
# fmt: on
