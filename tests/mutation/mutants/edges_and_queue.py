"""Named mutants of the caller's context, bytes, journal faults and edges, the run
directories' one reader, and the campaign queue with exact timeouts."""

from __future__ import annotations

from tests.mutation.mutants.framework import (
    CLIENT_KEYS,
    CLUSTERS,
    CORE,
    DRIVE,
    EXECUTE,
    FAULTS,
    JOURNAL_FILE,
    MARKERS,
    MARKERS_TESTS,
    OBSERVATION,
    PLAN,
    POLLS,
    QUEUE_CLI,
    QUEUE_ENGINE,
    RENDER,
    RUN_COMMAND,
    SHARED_POLL,
    SKY_RUN_DIRS,
    STORE,
    M,
    Mutant,
)

# One mutant per line, however long: (name, file, original, replacement, why, ...).
# fmt: off
MUTANTS: list[Mutant] = [
    # -- the caller's context, bytes, journal faults, edges (issue 21) ----------------------
    M("journal-identity-unchecked", JOURNAL_FILE, "if self._identity is not None and file_identity(self.path) != self._identity:", "if False:", "a journal deleted or replaced mid-run goes unnoticed (the record only in the unlinked file)", tests=(FAULTS,)),
    M("journal-fault-is-bad-input", RUN_COMMAND, "journal_failed(exc, recorded, store), EXIT_JOURNAL_FAULT)", "journal_failed(exc, recorded, store), EXIT_BAD_INPUT)", "a journal that failed mid-run reads as bad input with nothing written (an invitation to run it again)", tests=(FAULTS,)),
    M("journal-fault-swallowed-by-a-boundary", EXECUTE, "    except JOURNAL_FAILURES:\n        raise\n    except Exception as exc:\n        engine.note(inv, f\"collection failed", "    except Exception as exc:\n        engine.note(inv, f\"collection failed", "a full disk while collecting is retried as a collection failure for ten minutes", tests=("tests/engine/test_journal_fault_boundaries.py",)),
    M("journal-fault-read-as-maybe-submitted", CLUSTERS, "        hold_lease(engine, inv)\n    except JOURNAL_FAILURES:\n        raise\n", "        hold_lease(engine, inv)\n", "a journal that failed before the submit is read as a submit that may have gone through", tests=("tests/engine/test_journal_fault_boundaries.py",)),
    M("journal-created-in-place", "vibesys/journal_schema/opening.py", "        if not path.exists():\n            _create(path)\n", "", "a creation killed half-way leaves a half-made journal that read commands refuse", tests=(f"{FAULTS}::test_a_creation_killed_half_way_leaves_no_journal",)),
    M("job-output-decoded", "vibesys/osutil/logtail.py", "                    sink.write(chunk)\n", "                    sink.write(chunk.decode(\"utf-8\", \"replace\").encode())\n", "binary and Latin-1 output is rewritten on its way out", tests=("tests/test_output_bytes.py",)),
    M("ignored-signals-dropped", "vibesys/adapters/local.py", "FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)", "FORWARDED = ()", "a job loses the signal dispositions its caller set (nohup, a script's background job)", tests=("tests/test_job_context.py",)),
    M("srun-end-waits-for-a-round", "vibesys/adapters/slurm/srun.py", "        if claim is None or claim.kind != \"job\" or code is None:\n", "        if claim is None or claim.kind != \"job\":\n", "an srun job that left no marker (killed, out of time) is read as ended by its srun's return", tests=("tests/adapters/test_srun_end.py",)),
    M("srun-end-of-another-job", "vibesys/adapters/slurm/srun.py", "        if job.job_id is not None and claimer != str(job.job_id):\n", "        if False:\n", "the end of a copy that claimed the attempt is taken for this job's", tests=("tests/adapters/test_srun_end.py",)),
    M("request-takes-anything", "vibesys/adapters/requests.py", "class AdapterRequest(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):", "class AdapterRequest(Struct, frozen=True, kw_only=True, forbid_unknown_fields=False):", "a recorded request with fields it does not know is taken as valid", tests=("tests/adapters/test_local_request.py",)),
    M("table-label-breaks-rows", RENDER, "    body = [[one_line(str(cell)) for cell in r] for r in rows]", "    body = [[str(cell) for cell in r] for r in rows]", "a label with a newline or an escape sequence breaks journal list", tests=("tests/test_edge_inputs.py::test_labels_with_newlines_and_escapes_stay_on_their_row",)),
    M("start-slot-never-waits", "vibesys/osutil/start_slots.py", "            if time.monotonic() < deadline:\n", "            if False:\n", "a burst of runs starts all at once: every process imports and submits together, the first ones late", tests=("tests/test_start_slots.py",)),
    M("probe-prompts-a-round-for-an-own-job", SHARED_POLL, "                and not _seen_ending_here(engine, inv)\n", "", "a marker found a moment before srun returns makes a status round of a job whose end is seen here", tests=("tests/engine/test_own_end.py",)),
    M("ended-unobserved-counts-for-the-burst", POLLS, '"WHERE w.site=? AND i.outcome IS NULL",', '"WHERE w.site=?",', "a job that ended unobserved makes the next job's first round due at once", tests=("tests/engine/test_own_end.py",)),
    M("journal-path-not-checked", "vibesys/journal_schema/opening.py", "    check_journal_path(path)\n", "", "--journal /dev/null creates /dev/null-journal", tests=("tests/test_edge_inputs.py::test_a_journal_that_is_not_a_regular_file_is_refused_creating_nothing",)),
    # -- the remote attempt directories' one reader (rundir/markers.py) -------------------------
    M("markers-setup-failure-is-the-commands-end", MARKERS, "        exit_code=_number(files.get(EXIT_CODE_FILE)) if setup is None else None,\n", "        exit_code=_number(files.get(EXIT_CODE_FILE)),\n", "a Slurm job whose setup failed reads as a command that exited 86 (FAILED, not LAUNCH_FAILED)"),
    M("markers-last-line-lost", MARKERS, """while IFS= read -r l || [ -n "$l" ]; do""", """while IFS= read -r l; do""", "a marker written without its newline (`printf %s`) is read as empty over a remote transport"),
    M("markers-empty-refused-unseen", MARKERS, r"""    '    printf "%s %s\\n" "$i" "$f"\n'""", "", "an empty refused file (a wrapper killed while it wrote why) is not seen over a remote transport: the attempt reads as never started"),
    M("markers-negative-code-lost", MARKERS, '_NUMBER: Final = re.compile(r"-?[0-9]+")', '_NUMBER: Final = re.compile(r"[0-9]+")', "a negative exit code in a marker is read as no marker"),
    M("markers-odd-number-crashes", MARKERS, "    return int(value) if _NUMBER.fullmatch(value) else None", "    return int(value) if value.lstrip(\"-\").isdigit() else None", "a marker holding `--5` or a superscript digit stops the whole status round with a ValueError"),
    M("markers-local-newlines-translated", MARKERS, 'path.read_bytes().replace(b"\\0", b"").decode("utf-8", "replace")', 'path.read_text(errors="replace")', "the local reader translates \\r and keeps NULs: the same directory reads differently here and over SSH"),
    M("markers-times-never-read", MARKERS, '    return _READ + (_TIMES if times else "") + "exit 0\\n"', '    return _READ + "exit 0\\n"', "SkyPilot's end time waits for its queue (the marker's time is never read)"),
    M("markers-cut-short-committed", MARKERS, "        files = pending.setdefault(int(index), {})\n        if not name and not bar:\n            done[int(index)] = files\n", "        files = done.setdefault(int(index), {})\n        if not name and not bar:\n            pass\n", "a directory whose answer was cut short reads as one that holds less"),
    M("sky-states-cut-short-taken", SKY_RUN_DIRS, "        if len(states) < len(dirs):\n", "        if False:\n", "a login node's answer cut short reads as remote attempt directories without a claim (NOT_FOUND, then a fence)"),
    M("sky-states-without-times", SKY_RUN_DIRS, "read_script(times=True)", "read_script(times=False)", "SkyPilot's end time waits for its queue (the marker's time is never asked for)"),
    M("slurm-round-cut-short-taken", "vibesys/adapters/slurm/backend.py", "        if not split or len(found) < len(dirs):\n", "        if not split:\n", "a status round's markers cut short read as jobs without a marker or claim", tests=MARKERS_TESTS),
    M("srun-end-without-its-time", "vibesys/adapters/slurm/srun.py", "read_here({directory: job.job_name}, times=True)", "read_here({directory: job.job_name})", "an srun job seen ending here records no end time", tests=("tests/adapters/test_srun_end.py",)),
    M("start-up-interrupt-raises", "vibesys/cli/app.py", "    if ctx.invoked_subcommand != \"run\":\n        interrupts_raise()\n", "    interrupts_raise()\n", "a Ctrl-C in run's start-up is a KeyboardInterrupt an import may drop (the job runs on)", tests=("tests/test_edge_inputs.py::test_until_run_takes_its_interrupts_over_a_sigint_exits_and_raises_nothing",)),
]
# fmt: on
# fmt: off
MUTANTS += [
    # -- the campaign queue, exact timeouts (issue 22) ---------------------------------------
    M("queue-not-waited-for", PLAN, "            if ctx.queue is not None and ctx.queue.ahead:\n", "            if False:\n", "a campaign's second evaluation is submitted while the first still runs (REJECTED, or two on one cluster)", tests=(QUEUE_ENGINE,)),
    M("queue-never-joined", STORE, "            if campaign is not None:\n                join_queue(", "            if False:\n                join_queue(", "an evaluation recorded on a busy campaign is refused instead of waiting its turn", tests=(QUEUE_ENGINE,)),
    M("queue-counts-ended-ones", "vibesys/journal_schema/queue.py", '" WHERE q.campaign = ? AND q.seq < ? AND i.state != ? ORDER BY q.seq"', '" WHERE q.campaign = ? AND q.seq < ? AND i.state != ? OR 1 ORDER BY q.seq"', "an ended evaluation still holds the queue: nothing after it ever runs", tests=(QUEUE_CLI,)),
    M("queue-order-is-not-kept", "vibesys/journal_schema/queue.py", "q.seq < ?", "q.seq != ?", "the evaluations of a campaign wait for each other (or run out of order)", tests=(QUEUE_CLI,)),
    M("queue-waits-on-nobody", DRIVE, "carry_after = time.monotonic() + carry_on_ahead(engine, inv)", "carry_after = time.monotonic() + 5.0", "a run waits forever behind a detached evaluation that nobody drives", tests=("tests/test_cli_skypilot.py::test_a_run_on_a_busy_campaign_waits_its_turn_instead_of_being_refused",)),
    M("deadline-never-cancels", OBSERVATION, '    seconds: float = int(row.body.get("effective_timeout_seconds") or 0)\n', "    seconds = 0\n", "an evaluation's recorded timeout is never read: it runs to the job's own (minute) limit", tests=("tests/bridge/test_server.py::test_a_timeout_ends_the_evaluation_as_timeout",)),
    M("queue-carry-ignores-deadline", CORE, "            if timed_out is not None:  # its deadline holds whoever carries it on\n", "            if False:\n", "a campaign's next evaluation, in another session, waits behind a dead session's evaluation past its deadline", tests=("tests/bridge/test_session_restart.py::test_another_session_of_the_campaign_enforces_the_deadline_of_its_queues_head",)),
    M("driver-ignores-deadline", DRIVE, "inv, deadline=deadline, interrupt=interrupt,", "inv, deadline=None, interrupt=interrupt,", "a process that drives a dead bridge's evaluation (`vibesys wait`) lets it run past its recorded deadline", tests=("tests/bridge/test_session_restart.py::test_whoever_drives_a_bridge_evaluation_enforces_its_recorded_deadline[wait]",)),
    M("gpu-timeout-not-sent", "vibesys/broker/client.py", '        body["timeout_seconds"] = args.timeout_seconds', "        pass", "vibesys-gpu --timeout-seconds is accepted and ignored", tests=("tests/broker/test_protocol.py::test_the_client_sends_its_timeout_and_refuses_a_bad_one",)),
    M("bridge-sky-candidate-frozen", "vibesys/bridge/site.py", "            if recorded is not None:  # the snapshot as it is now", "            if False:  # the snapshot as it is now", "a SkyPilot session's second evaluation of an edited candidate is refused as changed (MISCONFIGURED)", tests=("tests/bridge/test_session_skypilot.py::test_a_session_on_a_campaign_cluster",)),
    M("gpu-timeout-past-the-limit", "vibesys/broker/admission.py", "            elif timeout > minutes * 60:", "            elif False:", "a --timeout-seconds past the job's --time is taken: Slurm ends it first, as TIMEOUT of Slurm's", tests=("tests/broker/test_admission.py",)),
]
# fmt: on
# fmt: off
MUTANTS += [
    # -- nothing outlives a job (issue 34) ---------------------------------------------------
    M("wrapper-not-a-subreaper", "vibesys/adapters/local_wrapper.py", "    _become_subreaper(err)\n", "", "a setsid'd or double-forked process of a local job goes to init and runs on after its end", tests=("tests/adapters/test_local_reap.py",)),
    M("leftovers-session-ignored", "vibesys/adapters/local_leftovers.py", '    if group.get("sid") == int(claim.get("pid") or 0):', "    if False:", "a killed wrapper's double-forked process reads as nothing running: CANCELLED while it runs", tests=("tests/adapters/test_local_reap.py",)),
    # -- vibesys.Client: idempotency keys, one poll per site for a process's threads (issue 37) --
    M("client-key-ignored", CLIENT_KEYS, "request_id=request_id(key, new_id := new_invocation_id()),", "request_id=request_id(None, new_id := new_invocation_id()),", "the same key submits a second job (after a crash, or from another process)", tests=("tests/client",)),
    M("client-key-identity-unchecked", CLIENT_KEYS, "_same(key, row.body, sub.body())", "_same(key, row.body, row.body)", "a key reused with another command silently returns the first one's result", tests=("tests/client/test_client_local.py",)),
    M("client-key-row-after-the-invocation", CLIENT_KEYS, "        if not invocation_recorded(journal, row.invocation_id):\n            return _prepare(journal, row, sub, env, build())\n", "        if not invocation_recorded(journal, row.invocation_id) and _created:\n            return _prepare(journal, row, sub, env, build())\n", "a key whose recorder died before its invocation is never recorded: its handle follows nothing", tests=("tests/client/test_client_keys_crash.py",)),
    M("shared-poll-a-turn-per-thread", SHARED_POLL, "        turn = _turn(site)\n", "        turn = threading.Lock()\n", "every thread of a process (a client's handles) runs its own status round of the site", tests=("tests/engine/shared_poll/test_one_process_threads.py",)),
    # -- the profiling route (issue 38) -------------------------------------------------------
    M("capture-kept-whatever-its-digest", "vibesys/broker/client.py", "        if written == size and digest.hexdigest() == sha256:", "        if True:", "vibesys-gpu keeps a capture that is not the bytes the journal recorded", tests=("tests/broker/test_profile.py::test_the_client_keeps_a_capture_only_when_it_matches",)),
    M("profiler-env-overridden-by-agent", "vibesys/broker/admission.py", "env | profiler.variables()", "profiler.variables() | env", "the agent's variables override what the operator's profiler needs", tests=("tests/broker/test_profile.py",)),
    M("capture-removed-before-settled", "vibesys/broker/engine_runner.py", "        if inv.state is not JobState.DONE or not captures:", "        if not captures:", "an UNRESOLVED job's capture is removed while the job may still be writing it", tests=("tests/broker/test_profile.py",)),
    M("bridge-profiler-not-offered", "vibesys/bridge/admission.py", "        if call.profiler is not None and call.profiler not in self.profilers:", "        if False:", "a profile names a profiler the session does not offer and is recorded, to fail on the node", tests=("tests/bridge/test_admission.py",)),
    M("bridge-capture-name-staged", "vibesys/bridge/runner.py", 'left_out=tuple("/" + pattern.lstrip("/") for pattern in captures),', "left_out=(),", "a file of the capture's name in the workspace reaches the job's copy, where it can pose as the capture", tests=("tests/bridge/test_profile.py",)),
    M("bridge-profile-captures-not-collected", "vibesys/bridge/runner.py", "                (*evaluation.artifacts, *captures),", "                evaluation.artifacts,", "a profile's capture stays on the cluster: never brought home nor verified", tests=("tests/bridge/test_profile.py",)),
    M("proctrack-anything-passes", "vibesys/sitecheck/slurm.py", '    if tracking == "proctrack/cgroup":', "    if tracking:", "a Slurm site whose process tracking lets daemons outlive their jobs passes the check", tests=("tests/sitecheck/test_proctrack.py",)),
]
# fmt: on
