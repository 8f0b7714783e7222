"""The checks of a Slurm site (slurm.toml), in the order they run.

transport       the login (ssh: host key verified, key accepted) or the local shell
certificate     (ssh) days left on the identity's OpenSSH certificate
squeue          slurmctld answers
sbatch          sbatch --test-only accepts the site's sbatch_arguments
scancel         scancel answers
sacct           slurmdbd answers
partitions      the configured partitions exist; their limits against the agent's and the
                trusted sizing
rpc-limits      the controller's RPC rate limit, as the shared poll reads it
proctrack       whether the processes a job detaches end with it (ProctrackType, read from
                the same `scontrol show config` as rpc-limits)
workspace-root  remote_workspace_root is writable
compute-node    a tiny job on a compute node sees it at the same path
bwrap           (GPU commands on) the node can confine a command
"""

from __future__ import annotations

import re
import secrets

from msgspec import Struct

from vibesys.adapters.slurm.backend import SlurmBackend
from vibesys.adapters.slurm.limits import sbatch_sizing
from vibesys.adapters.slurm.site_parse import (
    parse_rate_limit,
    parse_sinfo_partitions,
    parse_slurm_minutes,
)
from vibesys.adapters.transports import Runner
from vibesys.config.slurm import SlurmSiteConfig, SshTransportConfig
from vibesys.sitecheck.access import SiteAccess, identity_path
from vibesys.sitecheck.certificate import certificate_found
from vibesys.sitecheck.options import CheckOptions
from vibesys.sitecheck.rootdir import CheckDir, RootNotWritable, make_check_dir, remove_check_dir
from vibesys.sitecheck.runner import Check, Found, fail, ok, warn
from vibesys.sitecheck.slurm_job import JobProbe, JobSettings, bwrap_found

__all__ = ["SlurmChecks", "SlurmSite"]

_TEST_ONLY = re.compile(r"to start at (\S+) using .*? on nodes (\S+) in partition (\S+)")


class SlurmSite(Struct, frozen=True):
    config: SlurmSiteConfig
    #: the file it was read from (named in fixes)
    source: str


class SlurmChecks:
    """One check run of a Slurm site; `close()` cancels and removes what it left."""

    def __init__(
        self, site: SlurmSite, options: CheckOptions, runner: Runner | None = None
    ) -> None:
        self.site = site
        self.config = site.config
        self.options = options
        self.transport = self.config.slurm.transport
        self.access = SiteAccess(
            self.transport,
            options.timeout_seconds,
            where=f"[slurm.transport] in {site.source}",
            runner=runner,
        )
        self.nonce = secrets.token_hex(8)
        self.job_name = f"vibesys-check-{self.nonce}"
        self.check_dir: CheckDir | None = None
        self.job: JobProbe | None = None
        #: what rpc-limits read from `scontrol show config`, for the rows after it
        self.site_facts: dict[str, str] = {}

    @property
    def root(self) -> str:
        return self.config.slurm.remote_workspace_root

    def checks(self) -> list[Check]:
        t = self.options.timeout_seconds
        controller = (
            "slurmctld does not answer: check `scontrol ping` and slurmctld's log on the "
            "controller, and that the Slurm commands here find the cluster's configuration"
        )
        found: list[Check] = [
            Check("transport", self.access.login, budget=2 * t + 5, fix=self._fix_transport()),
        ]
        if isinstance(self.transport, SshTransportConfig):
            found.append(Check("certificate", self._certificate, budget=t))
        job_wait = self.options.job_wait_seconds + self.options.reply_grace_seconds
        found += [
            Check("squeue", self._squeue, ("transport",), t + 5, controller),
            Check("sbatch", self._sbatch, ("squeue",), t + 5, controller),
            Check("scancel", self._scancel, ("squeue",), t + 5, controller),
            Check("sacct", self._sacct, ("transport",), t + 5, self._fix_sacct()),
            Check("partitions", self._partitions, ("squeue",), t + 5, controller),
            Check("rpc-limits", self._rpc_limits, ("squeue",), t + 5, controller),
            Check("proctrack", self._proctrack, ("rpc-limits",), t, controller),
            Check("workspace-root", self._workspace, ("transport",), t + 5, self._fix_root()),
            Check(
                "compute-node",
                self._compute_node,
                ("sbatch", "scancel", "workspace-root"),
                job_wait + 3 * t + 5,
                self._fix_share(),
            ),
            Check("bwrap", self._bwrap, ("compute-node",), t, self._fix_share()),
        ]
        return found

    def close(self) -> None:
        """Cancel the check's job if it may still be queued, remove its directory, log out."""
        try:
            if self.job is not None and self.job.submitted:
                self.job.cancel()
            if self.check_dir is not None:
                remove_check_dir(self.access, self.check_dir.path)
        finally:
            self.access.close()

    # -- the rows -------------------------------------------------------------------------------

    def _certificate(self) -> Found:
        user = self.transport.user if isinstance(self.transport, SshTransportConfig) else None
        return certificate_found(
            identity_path(self.transport),
            now=self.options.now(),
            warn_days=self.options.cert_warn_days,
            user=user,
        )

    def _command(self, argv: list[str], what: str, fix: str) -> Found:
        done = self.access.run(argv)
        if done.returncode == 127:
            return fail(
                f"{argv[0]}: command not found on the Slurm side",
                f"install the Slurm client there, or put it on PATH (login_shell = true when "
                f"`module load slurm` does that), in {self.site.source}",
            )
        if done.returncode != 0:
            said = " ".join(done.stderr.split())[-300:] or "(no output)"
            return fail(f"{argv[0]} exited {done.returncode}: {said}", fix)
        return ok(what)

    def _squeue(self) -> Found:
        return self._command(
            ["squeue", "-h", "--name", self.job_name, "-o", "%i"],
            "slurmctld answers (squeue)",
            "check that slurmctld runs and that this host may reach it (`scontrol ping`)",
        )

    def _sbatch(self) -> Found:
        arguments = self.config.slurm.sbatch_arguments
        argv = [
            "sbatch",
            "--test-only",
            *arguments,
            f"--job-name={self.job_name}",
            "--output=/dev/null",
            "--time=1",
            "--wrap=true",
        ]
        done = self.access.run(argv)
        options = f" with sbatch_arguments {' '.join(arguments)}" if arguments else ""
        if done.returncode != 0:
            said = " ".join(done.stderr.split())[-300:] or f"exit status {done.returncode}"
            where = "[slurm] sbatch_arguments" if arguments else "this account's association"
            return fail(
                f"sbatch --test-only{options} refused: {said}",
                f"fix {where} in {self.site.source} (the account, partition or QOS sbatch "
                "refuses); `sacctmgr show assoc user=$USER` lists what you may use",
            )
        match = _TEST_ONLY.search(done.stderr)
        plan = f": a job would start on {match[2]} in partition {match[3]}" if match else ""
        return ok(f"sbatch --test-only accepts a job{options}{plan}")

    def _scancel(self) -> Found:
        return self._command(
            ["scancel", "--name", self.job_name],
            "scancel answers",
            "check that slurmctld runs and that this account may cancel its own jobs",
        )

    def _sacct(self) -> Found:
        argv = ["sacct", "-n", "-X", "-P", "-o", "JobID", "-S", "now-60", "--name", self.job_name]
        return self._command(argv, "slurmdbd answers (sacct)", self._fix_sacct())

    def _partitions(self) -> Found:
        done = self.access.run(["sinfo", "-h", "-o", "%P %l"])
        if done.returncode != 0:
            said = " ".join(done.stderr.split())[-300:]
            return fail(f"sinfo exited {done.returncode}: {said}", "check that sinfo works here")
        return partitions_found(done.stdout, self.config, self.site.source)

    def _rpc_limits(self) -> Found:
        slurm = self.config.slurm.model_copy(
            update={"command_timeout_seconds": self.options.timeout_seconds}
        )
        config = self.config.model_copy(update={"slurm": slurm})
        scheduler = SlurmBackend(config, self.access.runner)
        facts = self.site_facts = scheduler.site_facts()
        schedule = scheduler.poll_schedule(facts)
        limit = parse_rate_limit(facts.get("SlurmctldParameters", ""))
        if limit is None:
            head = "no RPC rate limit (no rl_enable in SlurmctldParameters)"
        else:
            head = (
                f"RPC rate limit: rl_refill_rate={limit.refill} per rl_refill_period="
                f"{limit.period}s, rl_bucket_size={limit.bucket}"
            )
        age = facts.get("MinJobAge")
        kept = f"; squeue keeps finished jobs {age} (MinJobAge)" if age else ""
        return ok(
            f"{head}: status rounds at most every {schedule.floor:g} s ({schedule.why}){kept}"
        )

    def _proctrack(self) -> Found:
        return proctrack_found(self.site_facts)

    def _workspace(self) -> Found:
        try:
            self.check_dir = make_check_dir(self.access, self.root, self.nonce)
        except RootNotWritable as exc:
            return fail(str(exc), self._fix_root())
        made = " (created by this check)" if self.check_dir.created_root else ""
        return ok(f"{self.root} is writable by {self.check_dir.user}{made}")

    def _compute_node(self) -> Found:
        assert self.check_dir is not None
        agent = self.config.agent_gpu
        settings = JobSettings(
            name=self.job_name,
            check_dir=self.check_dir.path,
            nonce=self.nonce,
            sbatch_arguments=self.config.slurm.sbatch_arguments,
            bwrap=agent is not None,
            read_only_paths=agent.read_only_paths if agent is not None else (),
            wait_seconds=self.options.job_wait_seconds,
            grace_seconds=self.options.reply_grace_seconds,
        )
        self.job = JobProbe(self.access, settings, self.root, self._fix_share())
        return self.job.run()

    def _bwrap(self) -> Found:
        agent = self.config.agent_gpu
        paths = agent.read_only_paths if agent is not None else ()
        if self.job is None:
            return bwrap_found(
                JobProbe(self.access, JobSettings("", "", ""), self.root, ""),
                enabled=agent is not None,
                source=self.site.source,
                read_only_paths=paths,
            )
        return bwrap_found(
            self.job, enabled=agent is not None, source=self.site.source, read_only_paths=paths
        )

    # -- fixes ----------------------------------------------------------------------------------

    def _fix_transport(self) -> str:
        if isinstance(self.transport, SshTransportConfig):
            return f"check [slurm.transport] in {self.site.source} and that the login node answers"
        return f"fix shell_command of [slurm.transport] in {self.site.source}"

    def _fix_root(self) -> str:
        return (
            f"make {self.root} a directory the site's account can write, on the file system "
            f"the compute nodes share, or set remote_workspace_root in {self.site.source}"
        )

    def _fix_share(self) -> str:
        return (
            f"share {self.root} with the compute nodes at the same path, or set "
            f"remote_workspace_root in {self.site.source} to a directory they share"
        )

    @staticmethod
    def _fix_sacct() -> str:
        return (
            "start slurmdbd (or fix AccountingStorageType/AccountingStorageHost in slurm.conf): "
            "without accounting vibesys cannot read how a job ended once squeue forgot it"
        )


def partitions_found(sinfo: str, config: SlurmSiteConfig, source: str) -> Found:
    """The partitions row from `sinfo -h -o '%P %l'`: what the configuration names must exist,
    and the time it asks for must fit."""
    limits = parse_sinfo_partitions(sinfo)
    words = [line.split()[0] for line in sinfo.splitlines() if line.split()]
    names = [word.rstrip("*") for word in words]
    default = next((word.rstrip("*") for word in words if word.endswith("*")), None)

    def shown(name: str) -> str:
        if name not in limits:
            text = "no time limit reported"
        else:
            limit = limits[name]
            text = "unlimited" if limit is None else f"{limit} min"
        return f"{name} {text}" + (" (default)" if name == default else "")

    listing = ", ".join(shown(name) for name in dict.fromkeys(names)) or "none"
    problems: list[str] = []
    notes: list[str] = []
    trusted_parts, trusted_time = sbatch_sizing(config.slurm.sbatch_arguments)
    for name in trusted_parts:
        if name not in names:
            problems.append(f"sbatch_arguments names partition {name!r}, which sinfo does not list")
    if trusted_time is not None:
        targets = trusted_parts or ((default,) if default else ())
        try:
            minutes = parse_slurm_minutes(trusted_time, round_up=True)
        except ValueError:
            problems.append(f"sbatch_arguments --time={trusted_time} is not a Slurm time")
        else:
            for name in targets:
                if name in limits and not _fits(limits[name], minutes):
                    problems.append(f"sbatch_arguments --time={trusted_time} exceeds {shown(name)}")
    agent = config.agent_gpu
    if agent is not None:
        usable = [p for p in agent.partitions if p in limits]
        for name in agent.partitions:
            if name not in names:
                problems.append(f"vibesys.agent_gpu.partitions names {name!r}, not in sinfo")
            elif name not in limits:
                problems.append(f"{name} reports no time limit (sinfo n/a): no request fits it")
        fits = [p for p in usable if _fits(limits[p], agent.default_time_minutes)]
        if usable and not fits:
            problems.append(
                f"default_time_minutes {agent.default_time_minutes} fits none of "
                f"{', '.join(usable)}"
            )
        short = [p for p in usable if not _fits(limits[p], agent.max_time_minutes)]
        if usable and len(short) == len(usable):
            # A ceiling no partition allows: requests up to it pass the agent's limits, then
            # are refused at submission (the file promises what the site will not give).
            problems.append(
                f"max_time_minutes {agent.max_time_minutes} exceeds the MaxTime of every "
                f"configured partition ({', '.join(shown(p) for p in short)})"
            )
        elif short:
            notes.append(
                f"max_time_minutes {agent.max_time_minutes} exceeds the limit of "
                f"{', '.join(shown(p) for p in short)}: longer requests use another "
                "partition, or are refused"
            )
    if problems:
        return fail(
            f"{'; '.join(problems)} (sinfo: {listing})",
            f"fix the partitions and times in {source} to match the cluster's",
        )
    tail = f"; {'; '.join(notes)}" if notes else ""
    return ok(f"sinfo: {listing}{tail}")


def proctrack_found(facts: dict[str, str]) -> Found:
    """The proctrack row: only proctrack/cgroup ends every process of a job step, those that
    left its process group or its parent (setsid, a double fork) too."""
    tracking = facts.get("ProctrackType")
    if tracking == "proctrack/cgroup":
        return ok("ProctrackType=proctrack/cgroup: every process a job starts ends with it")
    return warn(
        f"ProctrackType={tracking or '(not reported)'}: a process a job detaches (setsid, a "
        "daemon) can outlive it on the node, holding its GPUs, memory and ports",
        "set ProctrackType=proctrack/cgroup in slurm.conf (with cgroup.conf) and restart "
        "slurmctld and every slurmd",
    )


def _fits(limit: int | None, minutes: int | None) -> bool:
    """A request of `minutes` (None: unlimited) fits a partition's `limit` (None: none)."""
    return limit is None or (minutes is not None and minutes <= limit)
