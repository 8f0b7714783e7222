"""What the sbatch and srun backends share, on the batch template (`batch/base.py`): the status
round (`_query`, `_classify`), the cancel by name, and the shared poll budget of a site.

One status round asks the scheduler at most twice for any number of jobs: one `squeue` over
all states for every name, then one `sacct` for the jobs squeue no longer knows (or that ended
without a marker). Markers and claims are read in one more (non-scheduler) command.

A job neither squeue nor sacct knows is reported NOT_FOUND with its attempt's claim, if any:
silence proves nothing (a submission may still be in flight, or slurmctld may be catching up),
so the engine settles such an attempt with a fence, never by the absence alone.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import PurePosixPath

from msgspec import Struct, structs

from vibesys.adapters.base import JobRef, PollSchedule, RemoteState, RemoteStatus
from vibesys.adapters.batch.base import BatchBackend
from vibesys.adapters.rundir.claim import Claim
from vibesys.adapters.rundir.markers import (
    NO_MARKERS,
    ROUND_SPLIT,
    DirState,
    parse_markers,
    read_here,
    round_script,
)
from vibesys.adapters.rundir.names import (
    CANCEL_FILE,
    EXIT_CODE_FILE,
)
from vibesys.adapters.rundir.reader import RunDirReader
from vibesys.adapters.slurm.parse import (
    SacctRow,
    SqueueRow,
    parse_sacct,
    parse_squeue,
    sacct_argv,
    squeue_argv,
)
from vibesys.adapters.slurm.parse import classify as classify_row
from vibesys.adapters.slurm.provenance import provenance
from vibesys.adapters.slurm.site_parse import parse_config, parse_rate_limit
from vibesys.adapters.slurm.status_rules import (
    absent_status,
    claimed_elsewhere,
    is_terminal,
    rows_by_name,
    sacct_lagging,
    squeue_knows_why,
)
from vibesys.adapters.times import reported_time
from vibesys.adapters.transports import LocalTransport, Runner
from vibesys.config.slurm import SlurmSiteConfig
from vibesys.errors import BackendUnavailable

#: The share of the site's RPC rate limit our status rounds may use: the rest is left for
#: submissions, cancels and the user's own commands.
RATE_LIMIT_SHARE = 0.5
#: The site facts `site_facts` keeps from `scontrol show config` (ProctrackType: whether a
#: job's detached processes end with it, which `vibesys check` reports).
SITE_FACT_KEYS = ("SlurmctldParameters", "MinJobAge", "ProctrackType")


class SlurmRunDirs(RunDirReader):
    """The remote attempt directories under the site's `remote_workspace_root`."""

    def __init__(self, config: SlurmSiteConfig, runner: Runner) -> None:
        # With the local transport the cluster's files are this host's files.
        shares = isinstance(runner, LocalTransport)
        timeout = config.slurm.command_timeout_seconds
        super().__init__(runner, timeout=timeout, shares_filesystem=shares)
        self._root = PurePosixPath(config.slurm.remote_workspace_root)

    def root(self) -> PurePosixPath:
        return self._root


class SlurmRound(Struct, frozen=True):
    """One status round's answers: squeue's rows (and by name), sacct's by name, and the
    markers and claims read for the jobs that needed them."""

    rows: list[SqueueRow]
    queued: dict[str, SqueueRow]
    accounted: dict[str, SacctRow]
    markers: dict[str, DirState]


class SlurmBackend(BatchBackend):
    """A Slurm backend: status rounds, cancels and the shared poll budget; submitting is the
    subclass's (sbatch or srun)."""

    def __init__(self, config: SlurmSiteConfig, runner: Runner) -> None:
        super().__init__(SlurmRunDirs(config, runner))
        self.config = config
        self.runner = runner

    def shared_polling(self) -> SlurmBackend:
        return self

    # -- commands ---------------------------------------------------------------------------

    def _run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        maybe_effect: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> tuple[int, str, str, str]:
        result = self.runner.run(
            argv,
            input=input,
            maybe_effect=maybe_effect,
            timeout=self.config.slurm.command_timeout_seconds,
            env=env,
        )
        return result.returncode, result.stdout, result.stderr, result.evidence()

    def _checked(self, argv: Sequence[str]) -> str:
        code, out, _, evidence = self._run(argv)
        if code != 0:
            raise BackendUnavailable(f"{argv[0]} failed", evidence=evidence)
        return out

    # -- status -----------------------------------------------------------------------------

    def _query(self, jobs: Sequence[JobRef]) -> SlurmRound:
        squeue = squeue_argv(names=[j.job_name for j in jobs])
        prefetched: dict[str, DirState] | None = None
        if self.dirs.shares_filesystem:
            rows = parse_squeue(self._checked(squeue))
        else:
            # Over a remote transport the round is one command: squeue and every job's markers
            # (shell builtins, no process per job); only the markers the logic below asks for
            # are used, as if read on demand.
            text, prefetched = self._squeue_with_markers(squeue, jobs)
            rows = parse_squeue(text)
        queued = rows_by_name(rows, jobs)

        def read(subset: Sequence[JobRef]) -> dict[str, DirState]:
            if prefetched is None:
                return self._markers(subset)
            return {j.job_name: prefetched[j.job_name] for j in subset if j.job_name in prefetched}

        def code_of(found: Mapping[str, DirState], job: JobRef) -> int | None:
            return found.get(job.job_name, NO_MARKERS).exit_code

        def ended(job: JobRef) -> bool:
            if prefetched is not None:
                return code_of(prefetched, job) is not None
            return os.path.exists(f"{self.dirs.remote_attempt_dir(job)}/{EXIT_CODE_FILE}")

        # A job squeue shows unfinished can have an exit marker already: its own, a moment
        # before squeue sees the end, or that of a copy of it that claimed the attempt first.
        markers = read([j for j in jobs if is_terminal(queued.get(j.job_name)) or ended(j)])
        # squeue forgets finished jobs after MinJobAge; a job that ended without a marker
        # needs sacct's ExitCode too.
        ask_sacct = [
            j
            for j in jobs
            if j.job_name not in queued
            or (is_terminal(queued[j.job_name]) and code_of(markers, j) is None)
        ]
        accounted = self._sacct(ask_sacct)
        unseen = [j for j in ask_sacct if j.job_name not in markers]
        markers.update(
            read(
                [
                    j
                    for j in unseen
                    if is_terminal(accounted.get(j.job_name))
                    or (j.job_name not in queued and j.job_name not in accounted)
                ]
            )
        )
        return SlurmRound(rows, queued, accounted, markers)

    def _classify(self, job: JobRef, seen: SlurmRound) -> RemoteStatus:
        cancelled_by_us = (job.attempt_dir / CANCEL_FILE).exists()
        found = seen.markers.get(job.job_name, NO_MARKERS)
        marker = found.exit_code
        live, record = seen.queued.get(job.job_name), seen.accounted.get(job.job_name)
        # squeue is the fresher view; sacct speaks for jobs squeue forgot, and for the
        # exit code of a job that ended without a marker, once it has caught up (until
        # then its row is a placeholder that proves nothing, and squeue's end stands).
        use_live = live is not None and (
            not is_terminal(live)
            or marker is not None
            or record is None
            or sacct_lagging(record)
            or squeue_knows_why(live, record)
        )
        row: SqueueRow | SacctRow | None = live if use_live else record
        claim = found.claim
        elsewhere: str | None = None
        # A job whose attempt another job claimed runs nothing: the claimer is the job.
        if row is not None and (claimer := claimed_elsewhere(claim, row.job_id)):
            elsewhere = f"job {row.job_id} found the attempt claimed by job {claimer}"
            row = self._claimers_row(seen.rows, job, claimer)
        if found.setup_failed is not None and row is not None and is_terminal(row):
            return RemoteStatus(
                job.job_name,
                row.job_id,
                RemoteState.LAUNCH_FAILED,
                observation=f"setup failed with status {found.setup_failed} "
                f"(snapshot copy or digest verification); the command did not run: {row.line}",
            )
        if row is not None:
            status = classify_row(row, marker, cancelled_by_us, job_name=job.job_name)
            where = {"site": self.config.slurm.name, **provenance(row)}
            told = status.observation if elsewhere is None else f"{elsewhere}; {status.observation}"
            return structs.replace(status, provenance=where, observation=told)
        # An attempt of unknown age counts as young: waiting costs less than a guess.
        # A claimer's own age counts (it may have started long after the attempt).
        age = _age(_claimed_at(claim) if elsewhere else job.intended_at) or 0.0
        caught_up = age > self.config.slurm.sacct_lag_seconds
        return absent_status(job, claim, marker, sacct_caught_up=caught_up, seen=elsewhere)

    def _claimers_row(
        self, rows: Sequence[SqueueRow], job: JobRef, claimer: str
    ) -> SqueueRow | SacctRow | None:
        """The row of the job that claimed `job`'s attempt: squeue's among the name's jobs,
        else sacct's by its id (a copy submitted under another name, or one squeue forgot).
        None only when neither knows it."""
        for row in rows:
            if (row.job_name, row.job_id) == (job.job_name, claimer):
                return row
        return self._sacct([structs.replace(job, job_id=claimer)]).get(job.job_name)

    def _sacct(self, jobs: Sequence[JobRef]) -> dict[str, SacctRow]:
        with_id = [j for j in jobs if j.job_id]
        by_name = [j for j in jobs if not j.job_id]
        rows: list[SacctRow] = []
        if with_id:
            rows += parse_sacct(self._checked(sacct_argv(job_ids=[str(j.job_id) for j in with_id])))
        if by_name:
            oldest = max((_age(j.intended_at) or 0.0) for j in by_name)
            since = f"now-{int(oldest) + 600}"
            rows += parse_sacct(
                self._checked(sacct_argv(names=[j.job_name for j in by_name], since=since))
            )
        names = {str(j.job_id): j.job_name for j in with_id}
        found: dict[str, SacctRow] = {}
        for row in rows:
            name = names.get(row.job_id, row.job_name)
            # The latest record of a name wins (sacct lists them oldest first).
            found[name] = row
        return found

    def _markers(self, jobs: Sequence[JobRef]) -> dict[str, DirState]:
        """Exit code markers, claims and failed setups of `jobs`, read as this host's files."""
        return read_here({str(self.dirs.remote_attempt_dir(j)): j.job_name for j in jobs})

    def _squeue_with_markers(
        self, squeue: Sequence[str], jobs: Sequence[JobRef]
    ) -> tuple[str, dict[str, DirState]]:
        dirs = {str(self.dirs.remote_attempt_dir(j)): j.job_name for j in jobs}
        code, out, _, evidence = self._run(
            ["sh", "-c", round_script(squeue), "vibesys-round", *dirs]
        )
        if code != 0:
            raise BackendUnavailable("squeue failed", evidence=evidence)
        text, split, rest = out.partition(f"\n{ROUND_SPLIT}\n")
        if not split:  # squeue printed nothing: the split line comes first
            text, split, rest = out.partition(f"{ROUND_SPLIT}\n")
        found = parse_markers(rest, dirs)
        if not split or len(found) < len(dirs):
            raise BackendUnavailable("the status round's output was cut short", evidence=out)
        return text, found

    # -- effects ----------------------------------------------------------------------------

    def _cancel_queued(self, job: JobRef) -> None:
        # scancel ANDs a job id with --name: the name alone reaches every copy.
        self._checked(["scancel", "--name", job.job_name])

    def poll_interval(self, age_seconds: float) -> float:
        return self.config.slurm.poll_interval(age_seconds)

    # -- the shared poll budget (adapters.base.SharedPolling) ---------------------------------

    def poll_site(self) -> str:
        slurm = self.config.slurm
        transport = slurm.transport
        where = "local" if transport.kind == "local" else f"{transport.user or ''}@"
        if transport.kind == "ssh":
            where += f"{transport.host}:{transport.port}"
        return f"slurm:{slurm.name}:{where}:{slurm.remote_workspace_root}"

    def site_facts(self) -> dict[str, str]:
        """What `scontrol show config` says about polling this site (asked once per site:
        the engine keeps the answer in the journal)."""
        config = parse_config(self._checked(["scontrol", "show", "config"]))
        return {key: config[key] for key in SITE_FACT_KEYS if key in config}

    def poll_schedule(self, facts: Mapping[str, str]) -> PollSchedule:
        slurm = self.config.slurm
        floor, why = slurm.poll_floor_seconds, "poll_floor_seconds"
        limit = parse_rate_limit(facts.get("SlurmctldParameters", ""))
        if limit is not None:
            # One round is one slurmctld RPC (squeue; sacct asks slurmdbd): keep our rounds to
            # a share of the per-user refill rate.
            rated = 1.0 / (RATE_LIMIT_SHARE * limit.per_second)
            if rated > floor:
                floor = rated
                why = (
                    f"rl_refill_rate={limit.refill} per rl_refill_period={limit.period}s: "
                    f"at most {RATE_LIMIT_SHARE:.0%} of it"
                )
        maximum = max(slurm.poll_max_seconds, floor)
        return PollSchedule(
            floor,
            slurm.poll_initial_seconds,
            maximum,
            slurm.poll_backoff,
            slurm.probe_seconds,
            why,
            settle=slurm.poll_settle_seconds,
            settle_max=slurm.poll_settle_max_seconds,
        )


def _claimed_at(claim: Claim | None) -> datetime | None:
    return reported_time(claim.get("started_at")) if claim else None


def _age(moment: datetime | None) -> float | None:
    if moment is None:
        return None
    return (datetime.now(UTC) - moment).total_seconds()
