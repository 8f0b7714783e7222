"""The sbatch adapter: the trusted evaluation path. Every job is named before it is submitted
(`--job-name=<stable name>`), never requeued by Slurm, claims its attempt before its command
starts, and is found again by that name (or its claim).

A submission is one remote command (`_SUBMIT`): check that the candidate's snapshot is staged,
create the remote attempt directory, write the batch script from stdin, and exec sbatch. Only
when the snapshot is missing does the stage run (its uploads), and the command again without the
check. Over SSH that is one round trip."""

from __future__ import annotations

import shlex
import threading
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from vibesys.adapters.base import Progress, SubmitReceipt, SubmitRequest
from vibesys.adapters.rundir.names import WORK_DIR
from vibesys.adapters.slurm.backend_base import SlurmBackendBase
from vibesys.adapters.slurm.limits import (
    PartitionLimits,
    batch_time,
    limits_argv,
    parse_partition_limits,
    time_refusal,
)
from vibesys.adapters.slurm.parse import parse_sbatch_parsable
from vibesys.adapters.slurm.request import SbatchRequest, SlurmRequestBase, make_request
from vibesys.adapters.slurm.scheduler import SlurmScheduler
from vibesys.adapters.slurm.script import (
    SCRIPT_FILE,
    render_sbatch,
    sbatch_argv,
)
from vibesys.adapters.slurm.submission import (
    REJECTIONS,
    Candidate,
    candidate_setup,
    job_spec,
)
from vibesys.adapters.transports import CommandResult, Runner, runner_from_config
from vibesys.adapters.transports import prewarm as prewarm_transport
from vibesys.config import SlurmSiteConfig
from vibesys.errors import BackendError, BackendMisconfigured, BackendUnavailable, SubmitRejected

if TYPE_CHECKING:
    pass

#: `sh -c _SUBMIT vibesys-submit WORK SCRIPT PYTHON VERIFY SNAPSHOT DIGEST SBATCH...`, the
#: batch script on stdin. With PYTHON set, the snapshot is probed first; when it is not
#: staged the command says so last on stderr (PROBE_SAID) and exits PROBE_BASE + the probe's
#: status (3: absent, 86: not verified) having submitted nothing, as it does with CANNOT_WRITE;
#: otherwise it is sbatch's answer (whose own status may be 100 or more: never read as a probe).
_SUBMIT = """set -u
work=$1 script=$2 python=$3 verify=$4 final=$5 digest=$6
shift 6
if [ -n "$python" ]; then
  "$python" -I -c "$verify" --probe "$final" "$digest"
  rc=$?
  if [ "$rc" -ne 0 ]; then
    [ "$rc" -gt 150 ] && rc=150
    echo "vibesys-submit: snapshot not staged ($rc)" >&2
    exit $((100 + rc))
  fi
fi
if ! { mkdir -p -- "$work" && cat > "$script"; }; then
  echo "vibesys-submit: cannot write $script" >&2
  exit 97
fi
exec "$@"
"""
CANNOT_WRITE = 97
PROBE_BASE = 100
PROBE_SAID = "vibesys-submit: snapshot not staged"


class SbatchBackend(SlurmBackendBase):
    name = "sbatch"

    # -- what the engine may ask of it (adapters.base.Backend) ---------------------------

    def shows_progress(self) -> SbatchBackend:
        return self

    def __init__(self, config: SlurmSiteConfig, runner: Runner | None = None) -> None:
        runner = runner or runner_from_config(config.slurm.transport)
        super().__init__(SlurmScheduler(config, runner))
        #: hears of staging uploads (set by whoever shows them, a terminal's progress bar)
        self.progress: Progress | None = None
        #: the partitions' limits, asked of sinfo once per backend (or ahead, in `prewarm`)
        self._limits: PartitionLimits | None = None

    def submit(self, request: SubmitRequest[SlurmRequestBase]) -> SubmitReceipt:
        scheduler = self.scheduler
        self._refuse_beyond_limits(request.spec)
        remote = scheduler.remote_attempt_dir(request.job_ref())
        spec = job_spec(request, remote, scheduler.config.slurm.sbatch_arguments)
        spec, candidate = candidate_setup(scheduler, request, spec)
        script = render_sbatch(spec)
        request.attempt_dir.mkdir(parents=True, exist_ok=True)
        (request.attempt_dir / SCRIPT_FILE).write_text(script)
        code, out, err, evidence = self._submit_once(request, remote, script, candidate)
        if code >= PROBE_BASE and candidate is not None and _probe_said(err):
            # The snapshot is not staged: nothing was submitted. Stage it, then submit.
            from vibesys.adapters import staging

            probed = CommandResult(
                code - PROBE_BASE,
                "",
                err,
                tuple(staging.probe_argv(candidate.root, candidate.digest)),
            )
            staging.stage(
                candidate.manifest,
                candidate.path,
                scheduler.runner,
                candidate.root,
                probed=probed,
                progress=self.progress,
            )
            code, out, err, evidence = self._submit_once(request, remote, script, None)
        if code == CANNOT_WRITE and err.startswith("vibesys-submit:"):
            raise BackendUnavailable("could not write the batch script", evidence=evidence)
        if code == 0:
            try:
                job_id = parse_sbatch_parsable(out)
            except BackendUnavailable as exc:
                # sbatch said yes in words we do not read: it may well have queued the job.
                raise BackendUnavailable(str(exc), evidence=evidence, maybe_submitted=True) from exc
            return SubmitReceipt(job_id, evidence)
        if REJECTIONS.search(err):
            raise SubmitRejected(
                f"sbatch refused the job: {' '.join(err.split())}", evidence=evidence
            )
        # Anything else (a timeout, "Socket timed out", a busy controller) may still have
        # queued the job: only a lookup by name, or a fence, can tell.
        raise BackendUnavailable("sbatch failed", evidence=evidence, maybe_submitted=True)

    def _refuse_beyond_limits(self, spec: SlurmRequestBase) -> None:
        """Refuse a time limit that no partition the job may use allows, before anything is
        written or submitted: a site that does not enforce partition limits at submission
        (EnforcePartLimits=NO) would otherwise queue the job for ever. The request's --time
        is the person's (REJECTED); a --time in [slurm] sbatch_arguments, which sbatch reads
        after it, is the site's (MISCONFIGURED). A failed sinfo leaves the decision to sbatch,
        whose refusal is read as the request's fault too."""
        config = self.scheduler.config.slurm
        asked = batch_time(spec.time_minutes, spec.partitions, config.sbatch_arguments)
        if asked is None:
            return
        if self._limits is None:
            ahead = _AHEAD.pop(spec.backend_key(), None)
            wait = config.command_timeout_seconds
            self._limits = ahead.answer(wait) if ahead else None
            if self._limits is None:
                self._limits = ask_limits(self.scheduler)
        if self._limits is None:
            return
        refused = time_refusal(asked.minutes, asked.partitions, self._limits, asked.asked)
        if refused is None:
            return
        if asked.by_site:
            raise BackendMisconfigured(
                refused,
                maybe_submitted=False,
                fix=f"lower --time in [slurm] sbatch_arguments of {spec.site_config} to what "
                "the partition allows (`vibesys check` lists the limits)",
            )
        raise SubmitRejected(f"{refused}: nothing submitted")

    def _submit_once(
        self,
        request: SubmitRequest[SlurmRequestBase],
        remote: PurePosixPath,
        script: str,
        candidate: Candidate | None,
    ) -> tuple[int, str, str, str]:
        """The one remote command of a submission (see `_SUBMIT`)."""
        script_path = remote / SCRIPT_FILE
        probe = ["", "", "", ""]
        if candidate is not None:
            from vibesys.adapters import staging

            probe = [
                "python3",
                staging.verify_script(),
                str(candidate.snapshot_dir),
                candidate.digest,
            ]
        argv = [
            "sh",
            "-c",
            _SUBMIT,
            "vibesys-submit",
            str(remote / WORK_DIR),
            str(script_path),
            *probe,
            *sbatch_argv(script_path),
        ]
        code, out, err, _ = self.scheduler.run(
            argv, input=script.encode(), maybe_effect=True, env=request.context.env
        )
        # The evidence names what ran without the submit script and the verifier's source.
        evidence = f"{shlex.join(sbatch_argv(script_path))} -> rc={code}"
        if err.strip():
            evidence += f" stderr: {' '.join(err.split())[:500]}"
        return code, out, err, evidence


def build(request: SbatchRequest) -> SbatchBackend:
    return SbatchBackend(request.site())


def prewarm(request: SbatchRequest) -> None:
    """Start reaching the cluster (an SSH connection and its helper) while `vibesys run` still
    records the invocation: the first command then finds it ready. A request that asks a time
    has the partitions' limits asked now too, on that connection: the check before the submit
    then costs no round trip of its own."""
    site = request.site()
    if batch_time(request.time_minutes, request.partitions, site.slurm.sbatch_arguments) is None:
        prewarm_transport(site.slurm.transport)
        return
    ahead = _AHEAD[request.backend_key()] = _Ahead()
    scheduler = SlurmScheduler(site, runner_from_config(site.slurm.transport))
    # sinfo's command opens the connection itself: no second one to warm beside it.
    threading.Thread(target=ahead.ask, args=(scheduler,), name="vibesys-sinfo", daemon=True).start()


def ask_limits(scheduler: SlurmScheduler) -> PartitionLimits | None:
    """The partitions' limits from sinfo; None when it fails or says what it should not."""
    try:
        code, out, _, _ = scheduler.run(limits_argv())
        return parse_partition_limits(out) if code == 0 else None
    except BackendError:
        return None  # proves nothing: sbatch decides (see SbatchBackend._refuse_beyond_limits)


class _Ahead:
    """The partitions' limits asked on a thread (`prewarm`); None when that failed."""

    def __init__(self) -> None:
        self.limits: PartitionLimits | None = None
        self.done = threading.Event()

    def ask(self, scheduler: SlurmScheduler) -> None:
        try:
            self.limits = ask_limits(scheduler)
        finally:
            self.done.set()

    def answer(self, timeout: float) -> PartitionLimits | None:
        return self.limits if self.done.wait(timeout) else None


#: the limits asked ahead of the submit, by the request's site (`backend_key`)
_AHEAD: dict[str, _Ahead] = {}


#: The registry's names for this adapter's request model and request builder.
Request = SbatchRequest


def _probe_said(err: str) -> bool:
    """The submit command's own word that it stopped at the probe (nothing submitted), not a
    status of 100 or more from sbatch or a wrapper around it."""
    lines = err.strip().splitlines()
    return bool(lines) and lines[-1].startswith(PROBE_SAID)


__all__ = ["Request", "SbatchBackend", "build", "make_request", "prewarm"]
